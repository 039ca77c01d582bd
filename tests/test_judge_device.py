"""Where the parent judges: the CPU on the interpreter platform, the verified GPU on GPU platforms.

The choice of device is tested here with a GPU platform description (no GPU is touched); the
comparison on a GPU needs one (skipped here with that reason) and ran on an H200 through the
adversarial set (docs/gpu_check.md, session 3: 53/53 as expected with GPU judging)."""

from __future__ import annotations

import pytest
import torch

from amdkv.verify.compare import compare_case, to_device
from amdkv.verify.verifier import Verifier


def test_interpreter_platform_judges_on_cpu(monkeypatch):
    monkeypatch.delenv("AMDKV_JUDGE_DEVICE", raising=False)
    with Verifier("cpu", spares=0) as v:
        assert v.judge_device is None
        assert v._env()["judge_device"] == "cpu"


def test_to_device_keeps_structure_and_non_tensors():
    obj = {"trials": [[torch.ones(2), 3]], "seeds": [1], "t": (torch.zeros(1), "x")}
    moved = to_device(obj, "cpu")
    assert moved["seeds"] == [1] and moved["trials"][0][1] == 3 and moved["t"][1] == "x"
    assert isinstance(moved["t"], tuple) and torch.equal(moved["trials"][0][0], torch.ones(2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: GPU judging compares on cuda:0")
def test_gpu_comparison_agrees_with_cpu():
    torch.manual_seed(0)
    g = torch.randn(1 << 20)
    e = g + torch.randn_like(g) * 1e-7
    for cand, want in ((g.clone(), True), (g + 1e-2, False)):
        cpu = compare_case([cand], [e], [g], [g], "default", {})
        gpu = compare_case([cand.cuda()], [e.cuda()], [g.cuda()], [g.cuda()], "default", {})
        assert cpu.ok is want and gpu.ok is want
        assert gpu.max_abs_err == pytest.approx(cpu.max_abs_err, rel=1e-6)


def test_gpu_platforms_judge_on_their_gpu_unless_told_cpu(monkeypatch):
    """The choice itself needs no GPU: a verifier whose platform is a GPU one judges on that device,
    and judge_device=cpu (env AMDKV_JUDGE_DEVICE=cpu, read by VerifierConfig.from_env) moves judging
    to the CPU."""
    from amdkv.verify.platform import PlatformInfo

    gpu = PlatformInfo(name="cuda", device="cuda:1", can_time=True, interpreter=False)
    monkeypatch.delenv("AMDKV_JUDGE_DEVICE", raising=False)
    with Verifier("cpu", spares=0) as v:
        v.platform = gpu
        assert v.judge_device == "cuda:1"
    monkeypatch.setenv("AMDKV_JUDGE_DEVICE", "cpu")
    with Verifier("cpu", spares=0) as v:
        v.platform = gpu
        assert v.config.judge_device == "cpu" and v.judge_device is None


def test_the_judging_parent_gives_back_cached_gpu_memory_above_its_allowance(monkeypatch):
    """After a comparison on the GPU the parent keeps at most JUDGE_CACHE_KEEP_BYTES cached and
    unused. No GPU here (a boundary we cannot reach): torch.cuda's counters are stand-ins; what is
    tested is the rule that decides when the cache is emptied."""
    import torch

    from amdkv.verify import judging

    calls = []
    state = {"reserved": 0, "allocated": 0}
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: state["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: state["allocated"])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("emptied"))
    state.update(reserved=judging.JUDGE_CACHE_KEEP_BYTES + (1 << 30), allocated=1 << 30)  # exactly the allowance
    judging.release_unused_gpu_cache("cuda:0")
    assert calls == []
    state.update(allocated=(1 << 30) - 1)  # one byte more than allowed is cached and unused
    judging.release_unused_gpu_cache("cuda:0")
    assert calls == ["emptied"]


@pytest.mark.parametrize("task_id, reads", [("l1_relu", False), ("l1_argmax", True)])
def test_the_judge_reads_inputs_only_for_comparators_that_use_them(monkeypatch, tmp_path, task_id, reads):
    """The default comparison needs only outputs: the judge must not load a case's inputs (and, on a
    GPU, move them there for every candidate: up to 17 GB for a KernelBench level-1 problem). An index
    comparator (argmax) does read them. Real verifications on `cpu`."""
    from amdkv.tasks.builtin import solution_path, task_path
    from amdkv.tasks.loader import load_task
    from amdkv.verify import judging
    from amdkv.verify.candidate import Candidate

    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    loaded: list[str] = []
    real = judging.load_tensor_file

    def recording(path):  # noqa: ANN001, ANN202
        loaded.append(str(path))
        return real(path)

    monkeypatch.setattr(judging, "load_tensor_file", recording)
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, trials=1) as verifier:
        verdict = verifier.verify(load_task(task_path(task_id)), Candidate(solution_path(task_id).read_text()))
    assert verdict.status == "ok", verdict.to_dict()
    assert any(p.endswith("expected.pt") for p in loaded)
    assert any(p.endswith("inputs.pt") for p in loaded) is reads, loaded
