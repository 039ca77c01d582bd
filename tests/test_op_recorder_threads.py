"""The op recorder on threads with no Python frame above it.

On CUDA, autograd runs backward on its own C++ threads: torch calls the recorder's
`__torch_dispatch__` there with no Python caller at all. Looking two frames up raised
"call stack is not deep enough" and turned seven TritonBench-G references into `runtime_error` on
the H200 (2026-12-02). `_thread.start_new_thread` calls its function from C in the same way, so the
case runs here on the CPU.
"""
from __future__ import annotations

import _thread
import sys
import threading

import torch

from amdkv.verify.runtime_guards import TorchOpRecorder


def dispatch_from_c_thread(recorder: TorchOpRecorder, x: torch.Tensor, monkeypatch) -> dict[str, object]:
    """Start `recorder.__torch_dispatch__` itself as the thread's function, so C calls it with no
    Python frame above; the "op" it dispatches records its result, an exception reaches
    sys.unraisablehook (where `_thread` reports it)."""
    done = threading.Event()
    outcome: dict[str, object] = {}

    def op(a, b):
        outcome["value"] = torch.mul(a, b)
        done.set()
        return outcome["value"]

    def unraisable(info):
        outcome["error"] = info.exc_value
        done.set()

    monkeypatch.setattr(sys, "unraisablehook", unraisable)
    _thread.start_new_thread(recorder.__torch_dispatch__, (op, (), (x, x)))
    assert done.wait(30), "the thread never finished"
    return outcome


def test_dispatch_without_a_python_caller_is_treated_as_the_harness(monkeypatch):
    monkeypatch.setattr(TorchOpRecorder, "trusted_region", ("/nowhere/program.py", 10))
    recorder = TorchOpRecorder()
    x = torch.full((4,), 3.0)
    outcome = dispatch_from_c_thread(recorder, x, monkeypatch)
    assert "error" not in outcome, outcome.get("error")
    assert torch.equal(outcome["value"], x * x)
    assert recorder.compute_ops == {}  # no program frame: the harness ran it, nothing recorded


def test_dispatch_from_candidate_lines_is_still_recorded(monkeypatch):
    # the fix must not trust everything: a call from this file, before the trusted line, is the candidate's
    monkeypatch.setattr(TorchOpRecorder, "trusted_region", (__file__, 10**6))
    recorder = TorchOpRecorder()
    x = torch.ones(4)
    recorder.__torch_dispatch__(torch.ops.aten.mul.Tensor, (), (x, x))
    assert recorder.compute_ops == {"mul": 1}
