"""CPU-testable parts of GPU timing: trace attribution, method selection, cross-checks, lock,
memory cap plumbing, and the parent's comparison of the call made after timing."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
import types
from types import SimpleNamespace

import pytest

import torch

from amdkv.verify import timing
from amdkv.verify.timing import check_consistency, kernel_ms_per_call
from amdkv.verify.worker_protocol import WORKER_SETTINGS_ENV, WorkerSettings, worker_settings

REAL_TIME_PROFILER = timing.time_profiler  # before any fixture replaces it


# ------------------------------------------------------------------------------ trace parsing
def _trace(calls):
    """A kineto-like chrome trace: per call a flush (fill kernel) then the call's kernels."""
    ev, ts, corr = [], 1000.0, 1
    for kernels in calls:
        ev.append({"ph": "X", "cat": "user_annotation", "name": "amdkv_flush", "ts": ts, "dur": 5.0})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts + 1, "dur": 3.0,
                   "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "FillFunctor", "ts": ts + 50, "dur": 30.0,
                   "args": {"correlation": corr}})
        corr += 1
        ts += 10
        ev.append({"ph": "X", "cat": "user_annotation", "name": "amdkv_call", "ts": ts, "dur": 20.0})
        for j, dur in enumerate(kernels):
            ev.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": ts + 2 + j, "dur": 1.0,
                       "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": f"triton_k{j}", "ts": ts + 100 + j * 10, "dur": dur,
                       "args": {"correlation": corr}})
            corr += 1
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "amdkv_call", "ts": ts + 100, "dur": 50.0})
        ts += 200
    return {"traceEvents": ev}


def test_kernel_ms_per_call_sums_the_calls_kernels_only():
    per = kernel_ms_per_call(_trace([[4.0], [5.0, 1.0], [4.5]]))
    assert per == pytest.approx([0.004, 0.006, 0.0045])


def test_kernel_ms_per_call_ignores_unlinked_kernels_and_accepts_a_list():
    tr = _trace([[2.0]])
    tr["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "other", "ts": 5, "dur": 99.0,
                              "args": {"correlation": 999}})
    assert kernel_ms_per_call(tr["traceEvents"]) == pytest.approx([0.002])


def test_kernel_ms_per_call_zero_when_a_call_launched_nothing():
    assert kernel_ms_per_call(_trace([[], [3.0]])) == pytest.approx([0.0, 0.003])


# ------------------------------------------------------------------------------ cross-checks
def test_consistency_accepts_plausible_numbers():
    assert check_consistency({"ms": 0.05, "calls": 100, "loop_wall_s": 0.2, "wall_s": 0.25}, 3.0) is None
    assert check_consistency({}, 1.0) is None


@pytest.mark.parametrize("t,parent,needle", [
    ({"ms": -1.0}, 1.0, "not a positive"),
    ({"ms": float("nan")}, 1.0, "not a positive"),
    ({"ms": 1e-6, "calls": 10, "loop_wall_s": 1.0}, 2.0, "faster than any"),
    ({"ms": 50.0, "calls": 100, "loop_wall_s": 0.5}, 3.0, "kernel time"),
    ({"ms": 0.01, "calls": 10, "loop_wall_s": 9.0}, 2.0, "longer than its whole process"),
])
def test_consistency_flags_impossible_reports(t, parent, needle):
    msg = check_consistency(t, parent)
    assert msg and needle in msg


def test_consistency_falls_back_to_child_wall():
    assert check_consistency({"ms": 10.0, "calls": 100, "wall_s": 0.1}, None)


# ------------------------------------------------------------------------------ method selection
@pytest.fixture
def fake_methods(monkeypatch):
    calls = []
    monkeypatch.setattr(timing, "_sync", lambda torch: None)

    def events(fn, *, flush, reps=50, warmup=5):
        calls.append("events")
        for _ in range(warmup + reps):
            fn()
        return [fake_methods.events_ms] * reps

    def graph(fn, *, flush, calls_=20, reps=20, **kw):
        calls.append("graph")
        fn()
        return [0.004] * 20

    def prof(fn, *, flush, reps=30, warmup=3, gpu_section=None):
        calls.append("profiler")
        if fake_methods.profiler_fails:
            raise RuntimeError("no CUPTI")
        fn()
        return [0.003] * 30

    monkeypatch.setattr(timing, "time_events", events)
    monkeypatch.setattr(timing, "time_graph", graph)
    monkeypatch.setattr(timing, "time_profiler", prof)
    monkeypatch.delenv(WORKER_SETTINGS_ENV, raising=False)
    fake_methods.events_ms = 0.01
    fake_methods.profiler_fails = False
    fake_methods.calls = calls
    return fake_methods


def _noop():
    return None


def worker_settings_env(monkeypatch, **settings):
    """What the pool gives a worker: its WorkerSettings as one JSON variable (earlier ones changed)."""
    monkeypatch.setenv(WORKER_SETTINGS_ENV, dataclasses.replace(worker_settings(), **settings).to_json())


def test_auto_small_kernel_uses_profiler(fake_methods):
    r = timing.measure(_noop, flush_nbytes=1024, device="cpu")
    assert r["method"] == "profiler_kernel_trace+l2_flush" and r["ms"] == pytest.approx(0.003)
    assert fake_methods.calls == ["events", "profiler"]
    assert r["events_ms"] == pytest.approx(0.01)
    assert r["calls"] == 55 + 1 and r["loop_wall_s"] >= 0


def test_lock_covers_gpu_runs_only_and_reports_wait(fake_methods, monkeypatch, tmp_path):
    """The timing lock is taken around each GPU run (events, then the small-kernel method) and
    its wait/hold times are returned; the profiler's trace parsing happens outside it."""
    held = []

    @contextlib.contextmanager
    def fake_exclusive():
        held.append("acquire")
        yield
        held.append("release")

    monkeypatch.setattr(timing, "exclusive_gpu", fake_exclusive)
    r = timing.measure(_noop, flush_nbytes=1024, device="cpu")
    assert held == ["acquire", "release"]  # events only: the fake profiler ignores gpu_section
    assert r["lock_wait_s"] >= 0 and r["lock_held_s"] >= 0

    # the real time_profiler: calls inside the section, parsing after it
    order = []
    monkeypatch.setattr(timing, "_profile_calls", lambda fn, **kw: order.append("run") or "prof")
    monkeypatch.setattr(timing, "_export_trace", lambda prof: order.append("parse") or {"traceEvents": []})

    @contextlib.contextmanager
    def section():
        order.append("lock")
        yield
        order.append("unlock")

    with pytest.raises(RuntimeError, match="0 call ranges"):
        REAL_TIME_PROFILER(_noop, flush=None, reps=30, gpu_section=section)
    assert order == ["lock", "run", "unlock", "parse"]


def test_auto_small_kernel_falls_back_to_graph(fake_methods):
    fake_methods.profiler_fails = True
    r = timing.measure(_noop, flush_nbytes=1024, device="cpu")
    assert r["method"] == "graph_replay+l2_flush(profiler_failed:RuntimeError)"
    assert r["ms"] == pytest.approx(0.004)


def test_auto_large_kernel_keeps_events(fake_methods):
    fake_methods.events_ms = 2.0
    r = timing.measure(_noop, flush_nbytes=1024, device="cpu")
    assert r["method"] == "cuda_events+l2_flush" and r["ms"] == 2.0 and fake_methods.calls == ["events"]


def test_env_selects_method(fake_methods, monkeypatch):
    worker_settings_env(monkeypatch, small_kernel_method="graph")
    assert timing.measure(_noop, flush_nbytes=1024, device="cpu")["method"] == "graph_replay+l2_flush"
    worker_settings_env(monkeypatch, timing_method="profiler")
    fake_methods.calls.clear()
    assert timing.measure(_noop, flush_nbytes=1024, device="cpu")["method"].startswith("profiler")
    assert fake_methods.calls == ["profiler"]
    worker_settings_env(monkeypatch, timing_method="nonsense")  # unknown values fall back to auto
    assert timing.measure(_noop, flush_nbytes=1024, device="cpu")["method"] == "graph_replay+l2_flush"


def test_threshold_env(fake_methods, monkeypatch):
    worker_settings_env(monkeypatch, small_kernel_ms=0.001)
    assert timing.measure(_noop, flush_nbytes=1024, device="cpu")["method"] == "cuda_events+l2_flush"


# ------------------------------------------------------------------------------ lock
def test_timing_lock_excludes_concurrent_holders(tmp_path, monkeypatch):
    worker_settings_env(monkeypatch, timing_lock=str(tmp_path / "gpu.lock"))
    order = []

    def hold(name, wait):
        with timing.exclusive_gpu():
            order.append((name, "in"))
            time.sleep(wait)
            order.append((name, "out"))

    a = threading.Thread(target=hold, args=("a", 0.2))
    a.start()
    time.sleep(0.05)
    b = threading.Thread(target=hold, args=("b", 0.0))
    b.start()
    a.join()
    b.join()
    assert order == [("a", "in"), ("a", "out"), ("b", "in"), ("b", "out")]


def test_lock_paths_are_per_gpu():
    from amdkv.verify.pool import gpu_lock_key

    assert timing.timing_lock_path("cuda0") != timing.timing_lock_path("cuda1")
    assert "/" not in os.path.basename(timing.timing_lock_path("gpu-12/34:ab"))
    if not torch.cuda.is_available():
        assert gpu_lock_key("cuda:1") == "cuda1"


# ------------------------------------------------------------------------------ memory cap
def test_default_gpu_mem_fraction():
    from amdkv.verify.pool import default_gpu_mem_fraction

    assert default_gpu_mem_fraction(1) == 0.85
    assert default_gpu_mem_fraction(4) == pytest.approx(0.2125)
    assert default_gpu_mem_fraction(0) == 0.85
    assert default_gpu_mem_fraction(100) == 0.05


def test_worker_applies_memory_cap_to_candidate_jobs_only(monkeypatch):
    from amdkv.verify import worker
    from amdkv.verify.worker_protocol import CandidateJob, ReferenceJob

    seen = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, d: seen.append((f, str(d))))
    # no GPU here: the device's size is the one thing stood in for (an 80 GB card)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(total_memory=80 * 2 ** 30))
    quarter = WorkerSettings(device="cuda:1", gpu_mem_fraction=0.25)
    reference = ReferenceJob(task_path="t.py", device="cuda:0", cases=[], report_path="r.json")
    candidate = CandidateJob(candidate_path="c.py", device="cuda:0", interpreter=False, cases=[], out_dir="o",
                             outputs_path="o.pt", report_path="r.json", readable=[], capture=False, backend=None)
    assert worker._apply_gpu_memory_cap(reference, quarter) is None
    assert worker._apply_gpu_memory_cap(candidate, dataclasses.replace(quarter, device="cpu")) is None
    assert worker._apply_gpu_memory_cap(candidate, WorkerSettings(device="cuda:1")) is None  # no cap asked
    assert seen == []
    assert worker._apply_gpu_memory_cap(candidate, quarter) == 0.25
    assert seen == [(0.25, "cuda:1")]
    assert worker._apply_gpu_memory_cap(candidate, WorkerSettings(device="cuda:0", gpu_mem_fraction=0.5)) == 0.5
    assert seen[-1] == (0.5, "cuda:0")
    # a reference that needed 20 GiB: the candidate may use 40 GiB (0.5 of the card) though its share is 0.25
    big = dataclasses.replace(candidate, gpu_mem_floor_bytes=40 * 2 ** 30)
    assert worker._apply_gpu_memory_cap(big, quarter) == 0.5 and seen[-1] == (0.5, "cuda:1")


def test_candidate_memory_cap_follows_the_reference_need():
    from amdkv.verify.gpu_memory import candidate_floor_bytes, effective_gpu_mem_fraction

    gib = 2 ** 30
    assert candidate_floor_bytes([]) == 0 and candidate_floor_bytes([0, 0]) == 0  # references on no GPU
    assert candidate_floor_bytes([3 * gib, 5 * gib]) == 10 * gib  # twice the largest case's need
    share = 0.85 / 8  # 8 jobs
    assert effective_gpu_mem_fraction(share, 0, 80 * gib) == round(share, 4)  # the share alone
    assert effective_gpu_mem_fraction(share, 10 * gib, 80 * gib) == 0.125  # the reference's need wins
    assert effective_gpu_mem_fraction(share, 200 * gib, 80 * gib) == 0.95  # never the whole card
    assert effective_gpu_mem_fraction(0.5, 10 * gib, 80 * gib) == 0.5  # a larger share stays


# ------------------------------------------------------------------------------ parent side
def _verifier_stub():
    from amdkv.config import VerifierConfig
    from amdkv.verify.verifier import Verifier

    verifier = Verifier.__new__(Verifier)
    verifier.config = VerifierConfig()
    return verifier


def test_parent_compares_the_call_after_timing():
    from amdkv.verify.verdict import CaseResult

    v = _verifier_stub()
    task = SimpleNamespace(metadata={}, comparator="default", tolerance={})
    x = torch.randn(64)
    expected = {"eager": [[x * 2]], "golden": [[(x * 2).double()]]}
    inputs = {"trials": [[x]], "seeds": [1234]}
    good = {"trials": [[x * 2]], "recheck": [x * 2], "post_timing": [x * 2]}
    cres = CaseResult(name="c", tags=["performance"])
    assert v._compare_case(task, None, cres, expected, inputs, good)[0] == "ok"
    bad = dict(good, post_timing=[torch.zeros(64)])
    status, reason, msg = v._compare_case(task, None, CaseResult(name="c", tags=[]), expected, inputs, bad)
    assert status == "mismatch" and "after timing" in msg
    bad_recheck = dict(good, recheck=[torch.zeros(64)])
    status, reason, msg = v._compare_case(task, None, CaseResult(name="c", tags=[]), expected, inputs, bad_recheck)
    assert status == "mismatch" and "re-check call" in msg
