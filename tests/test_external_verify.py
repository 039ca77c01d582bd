"""External-benchmark tasks through the real verifier on `cpu` (Triton interpreter), under the three
policies, and `amdkv eval` over them (both verdict sets, agreement, disagreements, model index).

Fixtures are small files we wrote in each benchmark's format (tests/data/external/). Each policy's
verifications run once per module (jobs=2) and the tests read the verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amdkv.tasks.suites import load_suite
from amdkv.verify import Candidate, Verifier

DATA = Path(__file__).parent / "data" / "external"
CAND = DATA / "candidates"
WHOLE_FILE = DATA / "tritonbench" / "data" / "TritonBench_G_v1" / "tiny_scale.py"


def _cand(name: str) -> Candidate:
    return Candidate((CAND / name).read_text(), name=name)


@pytest.fixture(scope="module")
def suites() -> dict[str, dict]:
    return {name: {t.id: t for t in load_suite(spec)} for name, spec in (
        ("tbg", f"tritonbench-g:{DATA / 'tritonbench'}"), ("rocm", f"rocmbench:{DATA / 'rocm'}"),
        ("kb", f"kernelbench:{DATA / 'kernelbench'}?levels=1"), ("hip", f"pytorch2hip:{DATA / 'kernelbench'}?levels=1"))}


def _ref(task) -> Candidate:
    return Candidate(task.metadata["reference_candidate"], name=f"reference of {task.id}")


@pytest.fixture(scope="module")
def verdicts(suites: dict[str, dict]) -> dict[str, dict[str, object]]:
    tbg, rocm, kb, hip = suites["tbg"], suites["rocm"], suites["kb"], suites["hip"]
    plan = {
        "strict": {
            "tbg_ref": (tbg["tiny_scale"], _ref(tbg["tiny_scale"])),
            "tbg_zeros": (tbg["tiny_scale"], _cand("tbg_scale_zeros.py")),
            "tbg_torch": (tbg["tiny_scale"], _cand("tbg_scale_torch.py")),
            "tbg_wrong": (tbg["tiny_rowsum"], _cand("tbg_rowsum_wrong.py")),
            # a model that answers with the whole file, tests included: judged on its kernel part
            "tbg_whole_file": (tbg["tiny_scale"], Candidate(WHOLE_FILE.read_text())),
            "rocm_ref": (rocm["test_tiny_add"], _ref(rocm["test_tiny_add"])),
            "rocm_fixture": (rocm["test_tiny_fixture"], _ref(rocm["test_tiny_fixture"])),
            "kb_ref": (kb["level1/1_Tiny_add"], _ref(kb["level1/1_Tiny_add"])),
            "kb_triton": (kb["level1/1_Tiny_add"], _cand("kb_add_triton.py")),
            "kb_torch": (kb["level1/1_Tiny_add"], _cand("kb_add_torch.py")),
            "hip_triton": (hip["level1/1_Tiny_add"], _cand("kb_add_triton.py")),
        },
        "benchmark": {
            "tbg_zeros": (tbg["tiny_scale"], _cand("tbg_scale_zeros.py")),
            "tbg_torch": (tbg["tiny_scale"], _cand("tbg_scale_torch.py")),
            "tbg_wrong": (tbg["tiny_rowsum"], _cand("tbg_rowsum_wrong.py")),
            "kb_torch": (kb["level1/1_Tiny_add"], _cand("kb_add_torch.py")),
        },
        "reference": {
            "kb_ref": (kb["level1/1_Tiny_add"], _ref(kb["level1/1_Tiny_add"])),
            "kb_ref_init": (kb["level1/2_Tiny_scale"], _ref(kb["level1/2_Tiny_scale"])),
        },
    }
    out: dict[str, dict[str, object]] = {}
    for policy, pairs in plan.items():
        with Verifier("cpu", jobs=2, policy=policy, timeout=120) as v:
            out[policy] = dict(zip(pairs, v.verify_many(list(pairs.values()))))
    return out


def _status(v) -> tuple[str, str | None]:
    return v.status, v.reason


def test_tritonbench_reference_passes_and_each_cheat_gets_its_reason(verdicts) -> None:
    s = verdicts["strict"]
    assert _status(s["tbg_ref"]) == ("ok", None), s["tbg_ref"].diagnostics
    assert s["tbg_ref"].interpreter_verified and s["tbg_ref"].env["policy"] == "strict"
    # zeros on a tiny-valued task: amdkv's tolerance scales with the output
    assert _status(s["tbg_zeros"]) == ("mismatch", "value_mismatch")
    # PyTorch doing the work behind a token kernel: counted on the candidate's lines only (the tests'
    # own `* 1e-4` on their lines is not)
    assert _status(s["tbg_torch"]) == ("hack_detected", "torch_compute_in_forward")
    assert "mul×12" in s["tbg_torch"].diagnostics  # 3 cases x (3 trials + 1 re-check)
    assert _status(s["tbg_wrong"]) == ("mismatch", "value_mismatch")
    whole = s["tbg_whole_file"]
    assert _status(whole) == ("ok", None), whole.diagnostics
    assert whole.candidate_sha256 == Candidate(WHOLE_FILE.read_text()).sha256  # the hash of what was sent


def test_benchmark_policy_is_the_benchmarks_own_rule_holes_included(verdicts) -> None:
    b = verdicts["benchmark"]
    assert _status(b["tbg_zeros"]) == ("ok", None)   # GEAK-eval's fixed atol=1e-3 accepts zeros here
    assert _status(b["tbg_torch"]) == ("ok", None)   # no anti-hack check in the benchmark's rule
    assert _status(b["tbg_wrong"]) == ("mismatch", "value_mismatch")
    assert "allclose(atol=1e-3" in b["tbg_wrong"].diagnostics
    assert _status(b["kb_torch"]) == ("ok", None)


def test_rocm_pytest_tests_run_inside_the_worker(verdicts) -> None:
    s = verdicts["strict"]
    assert _status(s["rocm_ref"]) == ("ok", None), s["rocm_ref"].diagnostics
    assert _status(s["rocm_fixture"]) == ("unverifiable", "benchmark_test_fixture")
    assert s["rocm_fixture"].correct is None


def test_kernelbench_reference_needs_the_reference_policy(verdicts) -> None:
    s, r = verdicts["strict"], verdicts["reference"]
    assert _status(s["kb_ref"])[0] == "hack_detected" and s["kb_ref"].reason == "torch_fallback"
    assert _status(r["kb_ref"]) == ("ok", None) and r["kb_ref"].env["policy"] == "reference"
    assert _status(r["kb_ref_init"]) == ("ok", None)   # a problem with init inputs
    assert _status(s["kb_triton"]) == ("ok", None)
    assert _status(s["kb_torch"]) == ("hack_detected", "torch_fallback")


def test_pytorch2hip_judges_every_candidate_as_hip(verdicts) -> None:
    v = verdicts["strict"]["hip_triton"]
    assert v.language == "hip" and v.status == "compile_error" and v.reason == "no_hip_sources"


def test_reference_that_fails_here_makes_the_task_unverifiable(tmp_path: Path) -> None:
    """A benchmark whose own kernel cannot run on this platform: `unverifiable`/`reference_failed`
    (not infra_error), for every candidate, and the failing reference runs once."""
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
              "def k(x_ptr, n, BLOCK):\n    offs = tl.arange(0, BLOCK)\n    tl.store(x_ptr + offs, offs, mask=offs < n)\n\n\n"
              "def fill(x):\n    k[(1,)](x, x.numel(), 16)\n    return x\n")
    (folder / "nonconst.py").write_text(kernel + "\n" + "#" * 146 + "\n\ndef test_fill():\n"
                                        "    return {'a': fill(torch.zeros(8, device='cuda'))}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", spares=0, timeout=60) as v:
        first = v.verify(task, Candidate(kernel))
        second = v.verify(task, Candidate(kernel + "\n# another sample\n"))
        assert v.reference_runs == 1
    for verdict in (first, second):
        assert (verdict.status, verdict.reason) == ("unverifiable", "reference_failed")
        assert "arange" in verdict.diagnostics


# a TritonBench-G style kernel part: copy(x) through one Triton kernel
COPY_KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
               "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
               "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n\n\n"
               "def copy(x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, x.numel(), BLOCK=16)\n    return y\n")


def test_reference_past_its_timeout_makes_the_task_unverifiable(tmp_path: Path, monkeypatch) -> None:
    """`reference_timeout` (AMDKV_REFERENCE_TIMEOUT) bounds a benchmark's reference worker: one that
    sleeps past it makes the task `unverifiable`/`reference_timeout` naming the setting, not infra_error."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = COPY_KERNEL
    reference = kernel.replace("import torch\n", "import time\nimport torch\n").replace(
        "    y = torch.empty_like(x)\n", "    time.sleep(60)\n    y = torch.empty_like(x)\n")
    (folder / "slow.py").write_text(reference + "\n" + "#" * 146 + "\n\ndef test_copy():\n"
                                    "    return {'a': copy(torch.ones(8, device='cuda'))}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", spares=0, timeout=60, reference_timeout=3, verdict_cache=False) as v:
        verdict = v.verify(task, Candidate(kernel))
    assert (verdict.status, verdict.reason) == ("unverifiable", "reference_timeout")
    assert "timed out" in verdict.diagnostics and "AMDKV_REFERENCE_TIMEOUT" in verdict.diagnostics
    assert verdict.timings["total_s"] < 30


def test_reference_outputs_that_cannot_be_written_are_the_machines_failure(tmp_path: Path, monkeypatch) -> None:
    """A reference whose outputs are written short (the H200's KernelBench phase of 2026-12-04: torch's
    "unexpected pos 832 vs 726" beside a filling disk) is infra_error naming the write, never the
    benchmark task's `unverifiable`. The short write is simulated inside the reference worker, where
    it happens: the benchmark file's kernel part (trusted, the reference's only) makes torch.save raise
    torch's own message, since a disk that fills during one write cannot be arranged here."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = COPY_KERNEL
    short_write = ("\n\ndef _short_write(*args, **kwargs):\n"
                   "    raise RuntimeError('[enforce fail at inline_container.cc:672] . unexpected pos 832 vs 726')\n\n\n"
                   "torch.save = _short_write\n")
    (folder / "short.py").write_text(kernel + short_write + "\n" + "#" * 146 + "\n\ndef test_copy():\n"
                                     "    return {'a': copy(torch.ones(8, device='cuda'))}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", spares=0, timeout=60, verdict_cache=False) as v:
        verdict = v.verify(task, Candidate(kernel))
    assert (verdict.status, verdict.reason) == ("infra_error", "harness_failure"), verdict.diagnostics
    assert "could not be written" in verdict.diagnostics and "unexpected pos 832 vs 726" in verdict.diagnostics


PARTIAL_WRITE = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                 "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
                 "    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2, mask=offs < n)\n\n\n"
                 "def double_head(x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, WRITTEN, BLOCK=16)\n"
                 "    return y\n")


def test_output_the_benchmark_leaves_unwritten_is_judged_alike_in_reference_and_candidate(tmp_path: Path,
                                                                                           monkeypatch) -> None:
    """A benchmark kernel that writes only part of its `torch.empty` output (TritonBench-G's
    attention_forward_triton writes 96 of 128 columns): the reference as candidate is `ok` (both runs
    read NaN where nothing was written; 16 references were `mismatch` against themselves on the H200
    before), and a candidate that leaves more unwritten than the reference is still a mismatch."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    # many warm-up allocations first, so that the reference run's fresh memory is unlikely to be NaN
    tests = ("\n" + "#" * 146 + "\n\ndef test_head():\n    junk = [torch.ones(16) for _ in range(64)]\n"
             "    del junk\n    return {'y': double_head(torch.arange(16, dtype=torch.float32))}\n")
    (folder / "head.py").write_text(PARTIAL_WRITE.replace("WRITTEN", "8") + tests)
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", jobs=1, timeout=120, verdict_cache=False) as v:
        same = v.verify(task, Candidate(PARTIAL_WRITE.replace("WRITTEN", "8")))
        less = v.verify(task, Candidate(PARTIAL_WRITE.replace("WRITTEN", "4")))
    assert same.status == "ok", same.diagnostics
    assert (less.status, less.reason) == ("mismatch", "nan_mismatch"), less.diagnostics


def test_a_module_the_tests_import_is_not_test_code(tmp_path: Path, monkeypatch) -> None:
    """TritonBench-G's block_sparse_attn uses `torch` above the separator without importing it (its
    tests do): not `uses_benchmark_test` (it was, on the H200); a module a candidate may not import,
    or an alias, the tests bind is still test code to the candidate."""
    from amdkv.verify.program import program_findings, program_spec

    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = PARTIAL_WRITE.replace("import torch\n", "").replace("WRITTEN", "16")
    (folder / "noimport.py").write_text(kernel + "\n" + "#" * 146 + "\n\nimport torch\nimport pickle\n"
                                        "import math as m\n\ndef test_all():\n"
                                        "    return {'y': double_head(torch.arange(16, dtype=torch.float32))}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    spec = program_spec(task)
    assert spec["test_module_imports"] == ["pickle", "torch"]
    with Verifier("cpu", jobs=1, timeout=120, verdict_cache=False) as v:
        verdict = v.verify(task, Candidate(kernel))
    assert verdict.status == "ok", verdict.diagnostics
    sneaky = kernel + "\n\ndef leak(x):\n    return pickle.dumps(x), m.pi\n"
    found = {(f.code, f.message.split("`")[1]) for f in program_findings(spec, sneaky)}
    assert found == {("uses_benchmark_test", "pickle"), ("uses_benchmark_test", "m")}


def test_a_benchmark_test_that_does_not_reproduce_itself_makes_the_task_unverifiable(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """A test whose outputs change between two runs with the same seed (on the H200, TritonBench-G's
    index_select_bwd: five rows stored into one, in any order) can judge no candidate: `unverifiable`
    saying so, instead of `mismatch` for the benchmark's own kernel. Here the test reads the clock."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = PARTIAL_WRITE.replace("WRITTEN", "16")
    (folder / "clock.py").write_text(kernel + "\n" + "#" * 146 + "\n\nimport time\n\ndef test_clock():\n"
                                     "    x = torch.full((16,), float(time.perf_counter_ns() % 100000))\n"
                                     "    return {'y': double_head(x)}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", jobs=1, timeout=120, verdict_cache=False) as v:
        verdict = v.verify(task, Candidate(kernel))
    assert (verdict.status, verdict.reason) == ("unverifiable", "reference_failed"), verdict.diagnostics
    assert "do not reproduce their own outputs" in verdict.diagnostics


def test_every_trial_of_a_benchmark_reference_must_reproduce(tmp_path: Path, monkeypatch) -> None:
    """Not only the first trial: on the H200 `flash_decode2_phi` reproduced its first seed and not its
    second, and its own kernel was then a `mismatch` against itself. Here the test's output changes
    only on the fifth run in its process (the reference runs trials 0, 1, 2, then each again: the
    fifth run is trial 1's second), so a check of trial 0 alone would let it through."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    kernel = PARTIAL_WRITE.replace("WRITTEN", "16")
    (folder / "second_seed.py").write_text(
        kernel + "\n" + "#" * 146 + "\n\nimport time\n\nRUNS = [0]\n\ndef test_second_seed():\n"
        "    RUNS[0] += 1\n"
        "    value = float(time.perf_counter_ns() % 100000 + 2) if RUNS[0] == 5 else 1.0\n"
        "    return {'y': double_head(torch.full((16,), value))}\n")
    task = load_suite(f"tritonbench-g:{tmp_path}")[0]
    with Verifier("cpu", jobs=1, timeout=120, trials=3, verdict_cache=False) as v:
        verdict = v.verify(task, Candidate(kernel))
    assert (verdict.status, verdict.reason) == ("unverifiable", "reference_failed"), verdict.diagnostics
    assert "second run of trial 1" in verdict.diagnostics


def test_amdkv_eval_scores_both_ways_and_lists_disagreements(tmp_path: Path) -> None:
    from amdkv.evaluation import EvalSettings, run_eval

    tasks = {t.id: t for t in load_suite(f"tritonbench-g:{DATA / 'tritonbench'}")}
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "tiny_scale", "samples": [
        tasks["tiny_scale"].metadata["reference_candidate"], (CAND / "tbg_scale_zeros.py").read_text()]}) + "\n")
    settings = EvalSettings(suite=f"tritonbench-g:{DATA / 'tritonbench'}", samples=str(samples),
                            out=str(tmp_path / "run"), ks=(1,), device="cpu", jobs=2, bootstrap=50,
                            model_name="fixture-model")
    outcome = run_eval(settings, progress=False)
    assert outcome.verified == 4  # 2 samples x (amdkv-strict + benchmark rule)
    b = outcome.metrics["benchmark"]
    assert b["benchmark"] == "tritonbench-g" and b["amdkv_label"] == "amdkv_strict"
    ex = b["metrics"]["execution_accuracy@1"]
    assert ex["benchmark_rule"]["value"] == 1.0 and ex["amdkv_strict"]["value"] == 0.5
    assert b["metrics"]["call_accuracy@1"]["benchmark_rule"]["value"] == 1.0
    assert "fast_1.0" not in b["metrics"]  # kernel-file benchmarks are not timed
    a = b["agreement"]
    assert (a["both_pass"], a["benchmark_only"], a["amdkv_only"]) == (1, 1, 0)
    assert a["disagreements"][0]["task_id"] == "tiny_scale" and "tolerance" in a["disagreements"][0]["why"]
    report = Path(outcome.files["report_md"]).read_text()
    assert "TritonBench-G: its own metric next to amdkv-strict" in report and "### Disagreements" in report
    assert "its own metric" in Path(outcome.files["report_html"]).read_text()
    index = json.loads(Path(outcome.files["model_index"]).read_text())
    assert index["model_index"][0]["name"] == "fixture-model" and "platform=cpu" in index["yaml"]
    names = {m["name"] for m in index["model_index"][0]["results"][0]["metrics"]}
    assert "execution_accuracy@1 (amdkv-strict)" in names
    again = run_eval(settings, progress=False)  # both results files resume
    assert again.verified == 0 and again.reused == 2
    assert again.metrics["benchmark"]["agreement"]["both_pass"] == 1


def test_a_local_name_is_not_the_tests_global_of_the_same_name() -> None:
    """ROCmBench's flash attention: the kernel's parameter `N_CTX` is not the tests' module-level
    `N_CTX` (its reference was `uses_benchmark_test`). A global read of it, also from a default
    value or a decorator, is still refused."""
    from amdkv.verify.program import program_findings

    spec = {"test_names": ["N_CTX", "helper"]}
    local_uses = ("def kernel(X, N_CTX):\n    y = [N_CTX for N_CTX in range(3)]\n    return X + N_CTX\n\n\n"
                  "def outer(n):\n    N_CTX = n\n    def inner():\n        return N_CTX\n    return inner\n\n\n"
                  "f = lambda N_CTX: N_CTX * 2\n")
    assert program_findings(spec, local_uses) == []
    global_uses = ("def a(x):\n    return x + N_CTX\n\n\n"
                   "def b(x, n=N_CTX):\n    return x\n\n\n"
                   "def c(x):\n    global helper\n    helper = 1\n    return helper\n")
    lines = sorted(f.line for f in program_findings(spec, global_uses) if f.code == "uses_benchmark_test")
    assert lines == [2, 5, 12]
