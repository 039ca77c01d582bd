"""The host-memory cap of a candidate's worker on `cpu`, end to end: a real verifier, real worker
processes, the fault suite's host-filling candidate (tests/data/faults/host_oom.py).

Why a test of its own: since session 28 the cap is the data segment (process.cap_host_memory), not the
address space, and a host out-of-memory error names that cap instead of the device notes (the GPU
share, the verifier's copies on the device), which the fault suite's `host OOM` row carried on the H100.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amdkv.config import VerifierConfig
from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Verifier
from amdkv.verify.candidate import Candidate
from amdkv.verify.platform import PlatformInfo, detect_platform
from amdkv.verify.pool import host_memory_cap_bytes

HOST_OOM = Path(__file__).resolve().parent / "data" / "faults" / "host_oom.py"


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_a_candidate_past_the_host_cap_is_oom_and_its_message_names_the_cap(monkeypatch, tmp_path, sandbox):
    """The cap holds with the OS sandbox off too: it is applied at the worker's start, not by the sandbox."""
    monkeypatch.setenv("AMDKV_SANDBOX", sandbox)
    monkeypatch.setenv("AMDKV_MEM_CAP_GIB", "2")
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(task_path("l1_relu"))
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, trials=1) as verifier:
        hog = verifier.verify(task, Candidate(HOST_OOM.read_text()))
        good = verifier.verify(task, Candidate(solution_path("l1_relu").read_text()))
    assert (hog.status, hog.reason) == ("runtime_error", "oom"), hog.to_dict()
    assert ("[host memory cap] a candidate's worker may hold 2 GiB of host memory (its data segment, RLIMIT_DATA; "
            "AMDKV_MEM_CAP_GIB sets it)") in hog.diagnostics, hog.diagnostics[:2000]
    assert "[memory cap]" not in hog.diagnostics and "verifier's own copies" not in hog.diagnostics
    assert good.status == "ok", good.to_dict()  # the cap holds the candidate, not the verifier after it


def test_gpu_workers_get_their_own_host_cap_from_the_same_rule() -> None:
    """GPU platforms: AMDKV_GPU_HOST_MEM_GIB (a GPU is a boundary we cannot reach here: the platform is
    described, not detected, and no worker starts); interpreter platforms: AMDKV_MEM_CAP_GIB."""
    config = VerifierConfig(mem_cap_gib=8.0, gpu_host_mem_gib=32.0)
    gpu = PlatformInfo(name="cuda", device="cuda:0", can_time=True, interpreter=False)
    assert host_memory_cap_bytes(gpu, config) == 32 << 30
    assert host_memory_cap_bytes(detect_platform("cpu"), config) == 8 << 30
