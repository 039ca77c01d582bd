"""A candidate's large outputs spilled to disk per checked call (verify/output_spill.py): the same
verdicts with every call spilled as with none, the parent refuses spilled files that changed or that
a marker names badly, and the file guard keeps the candidate out of the spill folder. Real files, a
real verifier (cpu)."""

from __future__ import annotations

import os

import pytest
import torch

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Candidate, Verifier
from amdkv.verify.judging import load_tensor_file
from amdkv.verify.output_spill import MARKER_KEY, SPILL_FOLDER, OutputSpill, SpillError, resolve_spilled
from amdkv.verify.runtime_guards import FileAccessGuard
from amdkv.verify.worker_jobs import _tensor_bytes, save_for_parent


def _spill(tmp_path, budget_bytes: int) -> OutputSpill:
    return OutputSpill(str(tmp_path / SPILL_FOLDER), budget_bytes, save=save_for_parent, nbytes=_tensor_bytes)


def _outputs(spill: OutputSpill) -> tuple[dict, dict]:
    """A worker's outputs for one case as it writes them, and the same in memory."""
    calls = [[torch.randn(64, 32), 3.5], [torch.arange(10)], [torch.ones(4, dtype=torch.float16)]]
    written = {"case": {"trials": [spill.keep(c) for c in calls[:2]], "recheck": spill.keep(calls[2]),
                        "post_timing": spill.keep(None)}}
    return written, {"case": {"trials": calls[:2], "recheck": calls[2], "post_timing": None}}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _round_trip(tmp_path, written: dict) -> dict:
    path = tmp_path / "candidate_outputs.pt"
    save_for_parent(written, str(path))
    return resolve_spilled(load_tensor_file(path), str(tmp_path / SPILL_FOLDER), load_tensor_file)


def test_spilled_calls_come_back_equal_and_those_within_the_budget_stay_in_memory(tmp_path):
    spill = _spill(tmp_path, budget_bytes=100)  # the 64x32 float tensor (8 KiB) spills; 80 and 8 more bytes fit
    written, plain = _outputs(spill)
    assert spill.count == 1 and MARKER_KEY in written["case"]["trials"][0]
    assert written["case"]["trials"][1] is plain["case"]["trials"][1], "a small call was spilled"
    assert _same(_round_trip(tmp_path, written), plain)

    every = _spill(tmp_path / "all", budget_bytes=0)
    written, plain = _outputs(every)
    assert every.count == 3
    assert _same(_round_trip(tmp_path / "all", written), plain)


def test_a_spilled_file_changed_after_it_was_written_is_refused(tmp_path):
    """The candidate's later calls run in the same process, and native host code writes files
    without Python seeing it: the hash taken at writing time must catch a rewrite."""
    spill = _spill(tmp_path, budget_bytes=0)
    written, _ = _outputs(spill)
    forged = tmp_path / "forged.pt"
    save_for_parent([torch.zeros(64, 32), 3.5], str(forged))
    os.replace(forged, tmp_path / SPILL_FOLDER / "0.pt")
    with pytest.raises(SpillError, match="changed after the worker wrote them"):
        _round_trip(tmp_path, written)


def test_the_spill_digest_is_the_same_on_any_number_of_threads_and_sees_every_byte(tmp_path, monkeypatch):
    """spill_digest hashes 64-MiB chunks on several threads (session 23: one SHA-256 thread was ~15 s of a
    6-GiB-per-call KernelBench problem). Small chunks and reads here, so a 5.5-chunk file crosses every
    boundary: 1, 2 and 4 threads agree, and a changed byte in the first, a middle or the last chunk, a
    byte more or a byte less each give another digest."""
    from amdkv.verify import output_spill

    monkeypatch.setattr(output_spill, "DIGEST_CHUNK_BYTES", 2**20)
    monkeypatch.setattr(output_spill, "_READ_BYTES", 300 * 2**10)
    data = bytearray(os.urandom(5 * 2**20 + 2**19))
    path = tmp_path / "0.pt"
    path.write_bytes(data)
    digest = output_spill.spill_digest(path, threads=1)
    assert output_spill.spill_digest(path, threads=2) == digest == output_spill.spill_digest(path, threads=4)
    for at in (0, 2**20 - 1, 2**20, 3 * 2**20 + 12345, len(data) - 1):
        changed = bytearray(data)
        changed[at] ^= 1
        path.write_bytes(changed)
        assert output_spill.spill_digest(path, threads=4) != digest, f"a change at byte {at} went unseen"
    for other in (data + b"\0", data[:-1], data[:2**20]):
        path.write_bytes(other)
        assert output_spill.spill_digest(path) != digest
    path.write_bytes(b"")
    empty = output_spill.spill_digest(path)
    assert len(empty) == 64 and empty != digest


def test_the_spill_digest_falls_back_to_one_thread_when_none_can_start(tmp_path, monkeypatch):
    """A candidate runs in the worker process and may use up its RLIMIT_NPROC with threads of its own: the
    worker's digest must not fail for that (a failed spill is the machine's `infra_error`). Thread start
    failure is simulated at concurrent.futures, where it would surface as RuntimeError."""
    import concurrent.futures

    from amdkv.verify import output_spill

    monkeypatch.setattr(output_spill, "DIGEST_CHUNK_BYTES", 2**20)
    path = tmp_path / "0.pt"
    path.write_bytes(os.urandom(3 * 2**20))
    want = output_spill.spill_digest(path, threads=1)

    class NoThreads(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(concurrent.futures, "ThreadPoolExecutor", NoThreads)
    assert output_spill.spill_digest(path, threads=4) == want


def test_the_spill_digest_runs_its_threads_inside_a_sandboxed_worker(tmp_path, monkeypatch):
    """The worker takes the digest under the OS sandbox (seccomp's clone rule, RLIMIT_NPROC in its user
    namespace): its threads must start there, and give the digest the parent computes on one thread."""
    from amdkv.verify import os_sandbox, output_spill
    from amdkv.verify.sandbox import run_python_module, with_package_on_path
    from sandbox_support import require_sandbox_parts

    require_sandbox_parts(os_sandbox.SECCOMP, os_sandbox.LANDLOCK_FS)
    mods, work = tmp_path / "mods", tmp_path / "work"
    mods.mkdir()
    work.mkdir()
    (mods / "amdkv_test_digest.py").write_text(
        "import os, threading, time\n"
        "from amdkv.verify import output_spill\n"
        "output_spill.DIGEST_CHUNK_BYTES = 2**20\n"
        "seen = set()\n"
        "real = output_spill._chunk_digest\n"
        "def chunk(*a):\n"
        "    seen.add(threading.get_ident())\n"
        "    time.sleep(0.05)  # each chunk outlasts the submissions: the pool starts more than one thread\n"
        "    return real(*a)\n"
        "output_spill._chunk_digest = chunk\n"
        "open('data.bin', 'wb').write(bytes(range(256)) * (6 * 2**12))\n"
        "print(output_spill.spill_digest('data.bin', threads=4), len(seen))\n")
    env = dict(with_package_on_path(os.environ))
    env["PYTHONPATH"] = os.pathsep.join([str(mods), env["PYTHONPATH"]])
    plan = os_sandbox.plan("auto", writable=[str(work)], readable=[str(mods)])
    res = run_python_module("amdkv_test_digest", [], timeout=120, env=env, cwd=str(work), start="fork", sandbox=plan)
    assert res.returncode == 0, res.stderr[-2000:]
    digest, threads = res.stdout.split()[-2:]
    monkeypatch.setattr(output_spill, "DIGEST_CHUNK_BYTES", 2**20)
    assert digest == output_spill.spill_digest(work / "data.bin", threads=1)
    assert int(threads) > 1, "the digest ran on one thread inside the sandbox"


@pytest.mark.parametrize("marker", [
    {MARKER_KEY: "../candidate_outputs.pt", "digest": "0" * 64},
    {MARKER_KEY: "/etc/passwd", "digest": "0" * 64},
    {MARKER_KEY: "0.pt"},
    {MARKER_KEY: "0.pt", "digest": "0" * 64, "extra": 1},
    {MARKER_KEY: 0, "digest": "0" * 64},
    {MARKER_KEY: "7.pt", "digest": "0" * 64},  # no such file
])
def test_a_bad_marker_is_refused(tmp_path, marker):
    _outputs(_spill(tmp_path, budget_bytes=0))
    with pytest.raises(SpillError):
        resolve_spilled({"case": {"trials": [marker]}}, str(tmp_path / SPILL_FOLDER), load_tensor_file)


def test_a_symlink_in_place_of_a_spilled_file_is_refused(tmp_path):
    spill = _spill(tmp_path, budget_bytes=0)
    written, _ = _outputs(spill)
    target = tmp_path / "elsewhere.pt"
    os.replace(tmp_path / SPILL_FOLDER / "0.pt", target)
    os.symlink(target, tmp_path / SPILL_FOLDER / "0.pt")
    with pytest.raises(SpillError, match="not a regular file"):
        _round_trip(tmp_path, written)


def test_the_file_guard_keeps_the_candidate_out_of_the_spill_folder(tmp_path):
    """The audit hook itself, called as Python calls it (installing it would bind this test process)."""
    folder = tmp_path / SPILL_FOLDER
    folder.mkdir()
    inside = str(folder / "0.pt")
    guard = FileAccessGuard(readable=[], writable=[str(tmp_path)], protected_dirs=[str(folder)])
    guard.enabled = True
    for event, args in (("open", (inside, "rb", 0)), ("open", (inside, "wb", 0)),
                        ("os.rename", (inside, str(tmp_path / "x"), None, None)),
                        ("os.rename", (str(folder), str(tmp_path / "moved"), None, None)),
                        ("os.rename", (str(tmp_path / "mine.pt"), inside, None, None)),
                        ("os.remove", (inside, None)), ("os.rmdir", (str(folder), None))):
        with pytest.raises(PermissionError):
            guard._hook(event, args)
    assert len(guard.violations) == 7
    guard._hook("open", (str(tmp_path / "scratch.txt"), "w", 0))  # the rest of its folder stays writable
    with guard.paused():  # the worker's own write between two calls
        guard._hook("open", (inside, "wb", 0))
    assert guard.enabled and len(guard.violations) == 7


WRONG_RELU = ("tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)",
              "tl.store(out_ptr + offs, tl.maximum(x, 0.0) + 0.5, mask=mask)")


def test_every_call_spilled_gives_the_verdicts_of_none_spilled(tmp_path, monkeypatch):
    """`spill_outputs_mib=0` spills every checked call of every case: an `ok` candidate stays `ok` and
    a wrong one is the same `mismatch`, case by case; only the spilling run spent time spilling."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(task_path("l1_relu"))
    right = solution_path("l1_relu", "triton").read_text()
    wrong = right.replace(*WRONG_RELU)
    assert wrong != right
    verdicts = {}
    for mib in (256.0, 0.0):
        with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, spill_outputs_mib=mib) as verifier:
            verdicts[mib] = [verifier.verify(task, Candidate(src)) for src in (right, wrong)]
    kept, spilled = verdicts[256.0], verdicts[0.0]
    assert [v.status for v in spilled] == [v.status for v in kept] == ["ok", "mismatch"], \
        [(v.status, v.reason, v.diagnostics[:300]) for v in spilled + kept]
    for a, b in zip(kept, spilled):
        assert [(c.name, c.status, c.reason) for c in a.cases] == [(c.name, c.status, c.reason) for c in b.cases]
    assert all(v.timings["worker_spill_outputs_s"] > 0 for v in spilled)
    assert all(v.timings["worker_spill_outputs_s"] == 0 for v in kept)


def test_a_spill_the_disk_refuses_is_infra_error_not_the_candidates(tmp_path, monkeypatch):
    """A write that fails mid-run (here the sandbox's per-file limit, below one call's outputs) is the
    machine's failure, as the outputs file's write at the end always was: never a runtime_error."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    # the stand-in for a disk that refuses the write: the configured per-file limit, below one call's
    # outputs, with the task's need read as unknown (as when a reference's file cannot be read), so the
    # limit is not raised and the failed write is not the candidate's (disk_admission.candidate_file_need)
    for name in ("amdkv.verify.verifier.candidate_file_need", "amdkv.verify.judging.candidate_file_need"):
        monkeypatch.setattr(name, lambda sizes: None)
    task = load_task(task_path("l1_relu"))
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, spill_outputs_mib=0,
                  sandbox_file_size_gib=4 / 2 ** 20) as verifier:  # 4 KiB; the small case's outputs are 32 KiB
        verdict = verifier.verify(task, Candidate(solution_path("l1_relu", "triton").read_text()))
    assert (verdict.status, verdict.reason) == ("infra_error", "harness_failure"), verdict.diagnostics
    assert "OutputWriteError" in verdict.diagnostics and "spilled-outputs" in verdict.diagnostics
    assert "GiB free just after" in verdict.diagnostics  # what the disk held, for a short write's cause


def test_the_spill_benchmark_runs_and_round_trips():
    """benchmarks/output_spill.py at a tiny size: it runs, checks its own round trip, and reports."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "output_spill.py"
    res = subprocess.run([sys.executable, str(script), "--sizes-mib", "1", "--repeat", "1", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    row = json.loads(res.stdout)["rows"][0]
    assert row["size_mib"] == 1 and row["spill_worker_s"] > 0 and row["spill_parent_s"] > 0


def test_the_spill_budget_keeps_what_is_held_under_the_file_size_limit():
    """What a worker keeps in memory goes into one outputs file at the end, so its budget is held under
    the worker's per-file limit less torch.save's headroom: only a single call's outputs can pass the
    limit, and the parent raises the limit above any correct call's (disk_admission.candidate_file_need).
    Without a limit the configured budget stands; a limit below the headroom spills every call. A real
    RLIMIT_FSIZE, in a process of its own."""
    import subprocess
    import sys

    code = ("import resource\n"
            "from amdkv.verify.output_spill import FILE_HEADROOM_BYTES, budget_under_file_limit\n"
            "GiB = 2 ** 30\n"
            "print(budget_under_file_limit(4 * GiB))\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (GiB, resource.RLIM_INFINITY))\n"
            "print(budget_under_file_limit(4 * GiB), GiB - FILE_HEADROOM_BYTES)\n"
            "print(budget_under_file_limit(2 ** 20))\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (2 ** 20, resource.RLIM_INFINITY))\n"
            "print(budget_under_file_limit(4 * GiB))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    limited, expected = lines[1].split()
    import resource

    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY:  # this test's own process: none
        assert int(lines[0]) == 4 * 2 ** 30
    assert int(limited) == int(expected) and int(lines[2]) == 2 ** 20 and int(lines[3]) == 0


def test_a_candidate_raising_the_write_failure_itself_gets_no_infra_error(tmp_path, monkeypatch):
    """Only the spill's own failure (by identity) leaves the case's handling as the machine's: a
    candidate that raises an OutputWriteError from its forward, to be `infra_error` ("try again")
    instead of failing, is judged on it like any other exception. The static checks would refuse its
    import of amdkv first; they are skipped here (test only) to reach the worker's rule."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    source = solution_path("l1_relu", "triton").read_text()
    source = source.replace("class ModelNew(nn.Module):", "from amdkv.verify.worker_protocol import OutputWriteError\n\n\n"
                            "class ModelNew(nn.Module):", 1)
    forward = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
    source = source.replace(forward, forward + "        raise OutputWriteError('not a write: the candidate raised it')\n", 1)
    assert "raise OutputWriteError" in source and "import OutputWriteError" in source
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, spill_outputs_mib=0,
                  unsafe_skip_static_checks=True) as verifier:
        verdict = verifier.verify(load_task(task_path("l1_relu")), Candidate(source))
    assert verdict.status == "runtime_error", verdict.to_dict()
    assert "not a write" in verdict.diagnostics
