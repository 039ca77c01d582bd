"""The parent-worker protocol (amdkv/verify/worker_protocol.py): typed jobs, reports and settings.

Unit tests of the messages (round trips, strict reading, the one-of rule of a report, standard
library only), then the parent's side end to end on the CPU platform: a candidate's report that
lacks a field, has an unknown one, or is cut short is a harness failure (infra_error with the
message in the diagnostics), never a verdict against the candidate; so are worker settings
(AMDKV_WORKER_SETTINGS) that a real worker cannot read, and a HIP capture report the parent cannot.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from amdkv.verify import worker_protocol as wp
from amdkv.verify.worker_protocol import (BackendJobPart, CandidateCaseJob, CandidateCaseReport, CandidateError,
                                          CandidateJob, CandidateResult, Finding, HipCaptureReport, HipPrebuilt,
                                          ProtocolError,
                                          ReferenceCaseJob, ReferenceCaseReport, ReferenceJob, ReferenceResult,
                                          ReferenceTiming, WorkerFailure, WorkerReport, WorkerSettings, job_from_json,
                                          report_path_of, worker_settings)

ROOT = Path(__file__).resolve().parent.parent


def _candidate_job(backend: BackendJobPart | None = None) -> CandidateJob:
    return CandidateJob(candidate_path="/w/in/candidate.py", device="cpu", interpreter=True,
                        cases=[CandidateCaseJob(name="small", inputs_file="/w/in/inputs-0.pt", recheck=True,
                                                time=False, flush_bytes=1024)],
                        out_dir="/w/scratch", outputs_path="/w/scratch/o.pt", report_path="/w/scratch/r.json",
                        readable=["/w/in/inputs-0.pt"], capture=False, backend=backend, gpu_mem_floor_bytes=2 ** 30)


def _reference_job() -> ReferenceJob:
    return ReferenceJob(task_path="/t/task.py", device="cuda:0", report_path="/w/r.json", cases=[
        ReferenceCaseJob(name="big", seeds=[1234], init_seed=42, inputs_file="/c/inputs.pt",
                         expected_file="/c/expected.pt", golden=True, golden_oom_fallback=False, time=True,
                         flush_bytes=2 << 20,
                         compile_baseline=True)])


def _envelope(**fields: Any) -> dict[str, Any]:
    return dict(startup_s=0.5, startup_parts={"cuda_context_s": 0.2, "cuda_context_cpu_s": 0.1},
                sandbox={"applied": ["seccomp"]}, job_s=1.5, cpu_s=3.0, job_cpu_s=1.0, gpu_peak_bytes=3 << 30,
                job_received_at=100.0, reported_at=101.5, **fields)


def _candidate_report() -> WorkerReport:
    case = CandidateCaseReport(name="small", launches=[1, 1, 0], compute_ops={"aten.add.Tensor": 2},
                               findings=[Finding(code="input_mutation", message="input 0 was modified")],
                               error=CandidateError(stage="forward", status="runtime_error", reason="oom",
                                                    type="OutOfMemoryError", message="m", traceback="tb"),
                               timing={"ms": 0.5, "calls": 55, "method": "cuda_events+l2_flush", "wall_s": 0.2})
    result = CandidateResult(cases=[case], error=None, file_violations=[], captures=[{"kernel": "k"}],
                             kernels={"k": 3}, stdout_tail="hi", import_s=0.1, phase_s={"import": 0.1},
                             phase_cpu_s={"import": 0.1}, phase_children_cpu_s={"import": 0.0},
                             launcher_signatures=[["*fp32", "i32", "constexpr"]])
    return WorkerReport(result=result, fatal=None, **_envelope())


def _reference_report() -> WorkerReport:
    case = ReferenceCaseReport(name="big", input_dtypes=["float32"], output_dtypes=["float32"], mutated=[],
                               min_bytes=4096, golden_available=True, golden_error=None, seconds=0.3,
                               gpu_need_bytes=3 * 2 ** 30, output_bytes=2 ** 20, phase_s={"eager": 0.1},
                               timing=ReferenceTiming(eager={"ms": 1.0}, compile=None, compile_error="no inductor"))
    return WorkerReport(result=ReferenceResult(cases=[case]), fatal=None, **_envelope())


# ------------------------------------------------------------------------------------- messages
@pytest.mark.parametrize("job", [
    _reference_job(), _candidate_job(),
    _candidate_job(BackendJobPart(trusted_from_line=12)),
    _candidate_job(BackendJobPart(hip_prebuilt=[HipPrebuilt(name="e", so_path="/b/e.so", module_name="m")])),
], ids=["reference", "candidate", "program", "hip"])
def test_jobs_survive_one_json_line(job):
    line = job.to_json()
    assert "\n" not in line
    assert job_from_json(line) == job and report_path_of(line) == job.report_path
    assert json.loads(line)["kind"] == job.KIND


@pytest.mark.parametrize("report", [_candidate_report(), _reference_report(),
                                    WorkerReport(result=None, fatal=WorkerFailure("KeyError", "'x'", "tb"),
                                                 **_envelope())],
                         ids=["candidate", "reference", "fatal"])
def test_reports_survive_their_json_file(report):
    assert WorkerReport.from_json(report.to_json()) == report


def test_a_missing_field_is_named():
    data = json.loads(_candidate_report().to_json())
    del data["result"]["cases"][0]["findings"][0]["message"]
    with pytest.raises(ProtocolError, match=r"WorkerReport\.result\.cases\[0\]\.findings\[0\]: missing field\(s\) "
                                            r"\['message'\]"):
        WorkerReport.from_dict(data)
    del data["cpu_s"]
    with pytest.raises(ProtocolError, match=r"missing field\(s\) \['cpu_s'\]"):
        WorkerReport.from_dict(data)


def test_an_unknown_field_is_named():
    data = json.loads(_candidate_job().to_json())
    data["cases"][0]["gpu_mem_fraction"] = 0.5
    with pytest.raises(ProtocolError, match=r"job\.cases\[0\]: unknown field\(s\) \['gpu_mem_fraction'\]"):
        job_from_json(json.dumps(data))


@pytest.mark.parametrize("kind", ["test", None])
def test_a_job_of_no_known_kind_is_refused(kind):
    data = json.loads(_reference_job().to_json())
    data["kind"] = kind
    with pytest.raises(ProtocolError, match="kind"):
        job_from_json(json.dumps(data))
    with pytest.raises(ProtocolError, match="not a 'candidate' message"):
        CandidateJob.from_dict(json.loads(_reference_job().to_json()))


def test_a_job_without_report_path_cannot_be_answered():
    data = json.loads(_reference_job().to_json())
    del data["report_path"]
    with pytest.raises(ProtocolError, match="report_path"):
        report_path_of(json.dumps(data))


def test_a_report_holds_a_result_or_a_failure():
    with pytest.raises(ProtocolError, match="exactly one"):
        WorkerReport(result=None, fatal=None, **_envelope())
    with pytest.raises(ProtocolError, match="exactly one"):
        WorkerReport(result=ReferenceResult(cases=[]), fatal=WorkerFailure("E", "e", ""), **_envelope())
    with pytest.raises(ProtocolError, match="expected a CandidateResult, got ReferenceResult"):
        _reference_report().result_of(CandidateResult)
    assert _candidate_report().result_of(CandidateResult).cases[0].name == "small"


def test_values_are_not_type_checked():
    """The parent judges the values it uses itself: a forged time stays a timing finding
    (timing.check_consistency), not a protocol error."""
    data = json.loads(_candidate_report().to_json())
    data["result"]["cases"][0]["timing"] = {"ms": "fast"}
    assert WorkerReport.from_dict(data).result_of(CandidateResult).cases[0].timing == {"ms": "fast"}


_SETTINGS = WorkerSettings(device="cuda:0", visible_gpus=1, timing_lock="/tmp/amdkv-timing-gpu-x.lock",
                           gpu_mem_fraction=0.2125, timing_method="graph", small_kernel_ms=0.05,
                           small_kernel_method="graph", prewarm_profiler=False, blocking_sync=True, worker_threads=4)


@pytest.mark.parametrize("settings", [_SETTINGS, WorkerSettings()], ids=["gpu", "defaults"])
def test_worker_settings_survive_their_variable(settings, monkeypatch):
    text = settings.to_json()
    assert "\n" not in text and WorkerSettings.from_json(text) == settings
    monkeypatch.setenv(wp.WORKER_SETTINGS_ENV, text)
    assert worker_settings() == settings  # what a worker reads is what the parent wrote


def test_worker_settings_default_to_the_configs():
    """A worker started by hand (no variable) runs with VerifierConfig's defaults, and the message
    carries every field VerifierConfig marks `worker`, plus the pool's own four."""
    from amdkv.config import VerifierConfig

    config = {f.name: f.default for f in dataclasses.fields(VerifierConfig) if f.metadata["worker"]}
    defaults = WorkerSettings()
    assert {name: getattr(defaults, name) for name in config} == config
    assert {f.name for f in dataclasses.fields(WorkerSettings)} - set(config) == {
        "device", "visible_gpus", "timing_lock", "gpu_mem_fraction"}


def test_worker_settings_without_the_variable_are_the_defaults(monkeypatch):
    monkeypatch.delenv(wp.WORKER_SETTINGS_ENV, raising=False)
    assert worker_settings() == WorkerSettings()


@pytest.mark.parametrize("change,needle", [
    (lambda data: data.pop("timing_lock"), r"missing field\(s\) \['timing_lock'\]"),
    (lambda data: data.update(small_kernel_msec=0.05), r"unknown field\(s\) \['small_kernel_msec'\]"),
], ids=["missing", "unknown"])
def test_unreadable_worker_settings_name_the_field(change, needle, monkeypatch):
    data = json.loads(_SETTINGS.to_json())
    change(data)
    with pytest.raises(ProtocolError, match=needle):
        WorkerSettings.from_dict(data)
    monkeypatch.setenv(wp.WORKER_SETTINGS_ENV, json.dumps(data))
    with pytest.raises(ProtocolError, match=r"WorkerSettings \(AMDKV_WORKER_SETTINGS\): " + needle):
        worker_settings()


_HIP_CAPTURE = HipCaptureReport(captures=[{"api": "load_inline", "name": "relu_ext", "cpp_sources": ["int f();"],
                                            "cuda_sources": [], "functions": ["f"], "with_cuda": None, "cxx": "hipcc"}],
                                import_error=None, init_error="Traceback ... CompileOnlyError: compile-only")


def test_a_hip_capture_report_survives_its_file():
    assert HipCaptureReport.from_json(_HIP_CAPTURE.to_json()) == _HIP_CAPTURE
    odd = HipCaptureReport(captures=[{"name": "e", "with_cuda": object}], import_error=None, init_error=None)
    assert HipCaptureReport.from_json(odd.to_json(default=str)).captures[0]["with_cuda"] == str(object)


@pytest.mark.parametrize("change,needle", [
    (lambda data: data.pop("init_error"), r"HipCaptureReport: missing field\(s\) \['init_error'\]"),
    (lambda data: data.update(worker_error=None), r"HipCaptureReport: unknown field\(s\) \['worker_error'\]"),
], ids=["missing", "unknown"])
def test_an_unreadable_hip_capture_report_names_the_field(change, needle):
    data = json.loads(_HIP_CAPTURE.to_json())
    change(data)
    with pytest.raises(ProtocolError, match=needle):
        HipCaptureReport.from_json(json.dumps(data))


def test_backend_part_hands_its_files():
    part = BackendJobPart(hip_prebuilt=[HipPrebuilt(name="e", so_path="/b/e.so", module_name="m")])
    handed = part.handed(lambda path: "/w/in/" + Path(path).name)
    assert handed.hip_prebuilt == [HipPrebuilt(name="e", so_path="/w/in/e.so", module_name="m")]
    assert part.hip_prebuilt[0].so_path == "/b/e.so"  # jobs are values: the original is unchanged
    program = BackendJobPart(trusted_from_line=3)
    assert program.handed(lambda path: "unused") is program


def test_protocol_imports_only_the_standard_library():
    """Workers import it before the candidate runs, and so does the parent."""
    tree = ast.parse(Path(wp.__file__).read_text())
    names = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert names - {"__future__"} <= set(sys.stdlib_module_names), names


# ------------------------------------------------------------------- timings (GPU paths, no GPU)
@pytest.mark.parametrize("compile_fails", [False, True])
def test_reference_timing_carries_eager_compile_or_why_not(monkeypatch, compile_fails):
    """The reference worker's baselines (timed on GPUs only) with a stand-in clock: torch.compile
    that fails leaves `compile` None and says why in `compile_error`."""
    torch = pytest.importorskip("torch")
    from amdkv.verify import timing, worker_jobs

    def measure(fn: Callable[[], Any], *, flush_nbytes: int, device: str) -> dict[str, Any]:
        fn()
        return {"ms": 2.0, "calls": 1}

    monkeypatch.setattr(timing, "measure", measure)

    def broken_compile(model: Any) -> Any:
        raise RuntimeError("no inductor here")

    if compile_fails:
        monkeypatch.setattr(torch, "compile", broken_compile)
    else:
        monkeypatch.setattr(torch, "compile", lambda model: model)
    got = worker_jobs._time_reference(torch.nn.ReLU(), [torch.ones(4)], "cpu", 1024, compile_baseline=True)
    assert got.eager == {"ms": 2.0, "calls": 1}
    if compile_fails:
        assert got.compile is None and got.compile_error == "RuntimeError: no inductor here"
    else:
        assert got.compile == {"ms": 2.0, "calls": 1} and got.compile_error is None
    eager_only = worker_jobs._time_reference(torch.nn.ReLU(), [torch.ones(4)], "cpu", 1024, compile_baseline=False)
    assert eager_only == wp.ReferenceTiming(eager={"ms": 2.0, "calls": 1}, compile=None, compile_error=None)


@pytest.mark.parametrize("compile_t,want_compile", [({"ms": 3.0}, 1.5), (None, None)])
def test_speedups_read_the_typed_reference_timing(compile_t, want_compile):
    from types import SimpleNamespace

    from amdkv.verify.speed import SpeedMixin
    from amdkv.verify.verdict import CaseResult

    ref = _reference_report().result_of(ReferenceResult).cases[0]
    ref.timing = ReferenceTiming(eager={"ms": 1.0}, compile=compile_t, compile_error=None if compile_t else "x")
    cres = CaseResult(name="big", tags=["performance"])
    speed = SpeedMixin()
    speed._gpu_spec = None  # type: ignore[attr-defined]  # no roofline floor
    speed._case_speed(cres, ref, {"ms": 2.0, "method": "cuda_events+l2_flush"}, SimpleNamespace(dtypes=["fp32"]))
    assert (cres.ref_ms, cres.cand_ms, cres.speedup) == (1.0, 2.0, 0.5)
    assert cres.speedup_compile == want_compile and cres.timing_method == "cuda_events+l2_flush"
    untimed = CaseResult(name="big", tags=["performance"])
    ref.timing = None
    speed._case_speed(untimed, ref, {"ms": 2.0}, SimpleNamespace(dtypes=["fp32"]))
    assert untimed.speedup is None and untimed.cand_ms is None


# ---------------------------------------------------------------------- the parent, end to end
def _drop_cpu_s(data: dict[str, Any]) -> str:
    del data["cpu_s"]
    return json.dumps(data)


def _add_field(data: dict[str, Any]) -> str:
    data["result"]["cases"][0]["speedup"] = 100.0
    return json.dumps(data)


def _cut_short(data: dict[str, Any]) -> str:
    return json.dumps(data)[:40]


@pytest.fixture(scope="module")
def cpu_verifier():
    pytest.importorskip("triton", reason="the candidate is a Triton kernel")
    from amdkv.verify import Verifier

    with Verifier("cpu", spares=0, timeout=120.0) as v:
        yield v


def _damage_after(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str,
                  damage: Callable[[dict[str, Any]], str], path_of: Callable[..., str | None]) -> None:
    """`owner.name` runs, then the JSON file `path_of(*its positional args)` (None: none) is rewritten
    by `damage`."""
    real = getattr(owner, name)

    def run_then_damage(*args: Any, **kw: Any) -> Any:
        res = real(*args, **kw)
        path = path_of(*args)
        if path is not None:
            Path(path).write_text(damage(json.loads(Path(path).read_text())))
        return res

    monkeypatch.setattr(owner, name, run_then_damage)


L1_RELU = ROOT / "amdkv" / "tasks" / "builtin" / "general" / "l1_relu.py"
SOLUTIONS = ROOT / "amdkv" / "tasks" / "builtin" / "solutions"


@pytest.mark.parametrize("damage,needle", [
    (json.dumps, None),
    (_drop_cpu_s, "missing field(s) ['cpu_s']"),
    (_add_field, "WorkerReport.result.cases[0]: unknown field(s) ['speedup']"),
    (_cut_short, "JSONDecodeError"),
], ids=["intact", "missing", "unknown", "truncated"])
def test_an_unreadable_candidate_report_is_a_harness_failure(cpu_verifier, monkeypatch,
                                                            damage: Callable[[dict[str, Any]], str],
                                                            needle: str | None):
    from amdkv.verify.pool import Spare

    def candidate_report(spare: Spare, job: wp.WorkerJob, *_: Any) -> str | None:
        return job.report_path if isinstance(job, CandidateJob) else None  # the reference's stays whole

    _damage_after(monkeypatch, Spare, "run", damage, candidate_report)
    verdict = cpu_verifier.verify(L1_RELU, SOLUTIONS / "triton" / "l1_relu.py")
    if needle is None:  # the control: the same report, rewritten whole, is judged as usual
        assert verdict.status == "ok" and verdict.timings["worker_cpu_s"] > 0, verdict.diagnostics[-2000:]
        return
    assert (verdict.status, verdict.reason) == ("infra_error", "harness_failure"), verdict.diagnostics[-2000:]
    assert needle in verdict.diagnostics and verdict.cases == []


def _settings_without_timing_lock(data: dict[str, Any]) -> str:
    del data["timing_lock"]
    return json.dumps(data)


def _settings_with_a_new_field(data: dict[str, Any]) -> str:
    data["timing_lock_s"] = 1.0
    return json.dumps(data)


@pytest.mark.parametrize("damage,needle", [
    (_settings_without_timing_lock, "missing field(s) ['timing_lock']"),
    (_settings_with_a_new_field, "unknown field(s) ['timing_lock_s']"),
    (_cut_short, "JSONDecodeError"),
], ids=["missing", "unknown", "truncated"])
def test_unreadable_worker_settings_are_a_harness_failure(cpu_verifier, monkeypatch,
                                                           damage: Callable[[dict[str, Any]], str], needle: str):
    """Settings a real CPU worker cannot read fail its start-up (forked, then exec'd): the parent
    answers infra_error/harness_failure with the worker's error, which names the field."""
    real_to_json = WorkerSettings.to_json

    def damaged(self: WorkerSettings, default: Any = None) -> str:
        return damage(json.loads(real_to_json(self, default)))

    monkeypatch.setattr(WorkerSettings, "to_json", damaged)  # pool.worker_env, the one writer
    verdict = cpu_verifier.verify(L1_RELU, SOLUTIONS / "triton" / "l1_relu.py")
    assert (verdict.status, verdict.reason) == ("infra_error", "harness_failure"), verdict.diagnostics[-2000:]
    assert "start-up" in verdict.diagnostics and needle in verdict.diagnostics, verdict.diagnostics[-2000:]
    assert verdict.cases == []


def _capture_without_init_error(data: dict[str, Any]) -> str:
    del data["init_error"]
    return json.dumps(data)


def _capture_with_a_new_field(data: dict[str, Any]) -> str:
    data["built"] = True
    return json.dumps(data)


@pytest.mark.parametrize("damage,needle", [
    (json.dumps, None),
    (_capture_without_init_error, "HipCaptureReport: missing field(s) ['init_error']"),
    (_capture_with_a_new_field, "HipCaptureReport: unknown field(s) ['built']"),
], ids=["intact", "missing", "unknown"])
def test_an_unreadable_hip_capture_report_is_a_harness_failure(cpu_verifier, monkeypatch,
                                                               damage: Callable[[dict[str, Any]], str],
                                                               needle: str | None):
    """The real HIP capture worker runs; its OUT.json is damaged before the parent reads it."""
    from amdkv.verify.backends import hip

    _damage_after(monkeypatch, hip, "run_python_module", damage, lambda module, args, *_: args[1])  # OUT.json
    verdict = cpu_verifier.verify(L1_RELU, SOLUTIONS / "hip" / "l1_relu.py")
    if needle is None:  # the control: compile-only on the CPU platform, judged as usual
        assert verdict.reason in ("no_hip_runtime", "no_hipcc"), verdict.diagnostics[-2000:]
        return
    assert (verdict.status, verdict.reason) == ("infra_error", "harness_failure"), verdict.diagnostics[-2000:]
    assert needle in verdict.diagnostics


ADVERSARIAL = ROOT / "tests" / "data" / "adversarial"


@pytest.mark.parametrize("resident", [True, False], ids=["resident", "host_inputs"])
def test_resident_inputs_setting_reaches_the_worker_and_keeps_verdicts(resident: bool):
    """`VerifierConfig.resident_inputs` travels in WorkerSettings, and the candidate worker judges
    the same with it on or off (on `cpu` both read the host tensors; on a GPU `on` copies each
    case's trials to the device once): a correct kernel stays `ok`, a kernel that writes into its
    input stays `hack_detected`/`input_mutation`, and one returning a view of an input stays caught."""
    pytest.importorskip("triton", reason="the candidates are Triton kernels")
    from amdkv.config import VerifierConfig
    from amdkv.verify import Verifier

    config = VerifierConfig(device="cpu", resident_inputs=resident)
    assert WorkerSettings(**config.worker_settings()).resident_inputs is resident
    manifest = {e["candidate"]: e for e in json.loads((ADVERSARIAL / "manifest.json").read_text())}
    with Verifier(config=config, spares=0, timeout=120.0) as v:
        assert v.verify(L1_RELU, SOLUTIONS / "triton" / "l1_relu.py").status == "ok"
        for name in ("input_mutation.py", "output_view_of_input.py"):
            want = manifest[name]
            task = next(p for p in (ADVERSARIAL / "tasks" / f"{want['task']}.py", L1_RELU.parent / f"{want['task']}.py")
                        if p.is_file())
            verdict = v.verify(task, ADVERSARIAL / name)
            assert (verdict.status, verdict.reason) == (want["status"], want["reason"]), verdict.diagnostics[-1500:]


def test_the_gpu_peak_is_zero_and_never_initialises_cuda_in_a_cpu_process():
    """A CPU worker reports no GPU peak (`gpu_peak_bytes` 0, so no `worker_gpu_peak_gib` timing) and reading
    or resetting it must not initialise CUDA there: a fresh interpreter stands for the worker process. On a
    GPU the value is torch's `max_memory_allocated` since the job began (not run here: no GPU)."""
    code = ("import torch; from amdkv.verify.worker import gpu_peak_bytes, reset_gpu_peak; reset_gpu_peak(); "
            "print(gpu_peak_bytes(), torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "False"]
    assert WorkerReport.from_json(_candidate_report().to_json()).gpu_peak_bytes == 3 << 30
