"""The host-memory cap of a candidate's worker on `cpu`, end to end: a real verifier, real worker
processes, the fault suite's host-filling candidate (tests/data/faults/host_oom.py).

Why a test of its own: since session 28 the cap is the data segment (process.cap_host_memory), not the
address space, and a host out-of-memory error names that cap instead of the device notes (the GPU
share, the verifier's copies on the device), which the fault suite's `host OOM` row carried on the H100.
"""

from __future__ import annotations

from pathlib import Path

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Verifier
from amdkv.verify.candidate import Candidate

HOST_OOM = Path(__file__).resolve().parent / "data" / "faults" / "host_oom.py"


def test_a_candidate_past_the_host_cap_is_oom_and_its_message_names_the_cap(monkeypatch, tmp_path):
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
