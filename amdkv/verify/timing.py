"""Kernel timing on GPUs (CUDA and ROCm share this code through torch.cuda).

What is measured is kernel time, not launch overhead (DESIGN.md section 2). Methods:

- ``events``   : per call, device events around the call, the last-level cache flushed before it
                 (a buffer twice the LLC, gpu_specs); median of many. Right for large kernels,
                 where the launch latency is hidden behind the flush that precedes the call.
- ``profiler`` : torch.profiler's kernel trace (CUPTI on NVIDIA, roctracer/rocprofiler-sdk on
                 ROCm): the sum of the durations of the kernels each call launched, cache flushed
                 before every call. Gaps between kernels and launch latency are not counted.
- ``graph``    : CUDA/HIP graph replay of many back-to-back calls, one flush per replay; the
                 per-call time includes the small gaps between graph nodes, and calls after the
                 first see a warm cache.
- ``auto``     : events first; a call under SMALL_KERNEL_MS is re-timed with the small-kernel
                 method (``profiler`` by default, ``graph`` when the profiler cannot attribute
                 kernels; see ``AMDKV_SMALL_KERNEL_METHOD``).

Measured on an H200 before this module existed: per-call events read 4-13x the kernel time for
3-9 us kernels, Triton's do_bench 1.7-2.5x. ``benchmarks/timing_fidelity.py`` compares every
method with an independent profiler measurement. The method used is recorded with the numbers
(``CaseResult.timing_method``), plus ``calls`` (every invocation of the function, warm-up
included) so that the parent can cross-check the numbers against wall clocks
(``check_consistency``). rocprofv3 (AMD) is in ``rocprof.py``: it wraps a whole process, so it is
a benchmark/offline method, not one for the warm worker processes.

Settings (VerifierConfig fields, passed to the worker in its WorkerSettings): ``timing_method``
(auto|events|graph|profiler; env AMDKV_TIMING_METHOD), ``small_kernel_method`` (profiler|graph),
``small_kernel_ms`` (threshold, default 0.1).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import tempfile
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from amdkv.verify.file_lock import exclusive_file_lock
from amdkv.verify.worker_protocol import worker_settings

SMALL_KERNEL_MS = 0.1
METHODS = ("auto", "events", "graph", "profiler")
SMALL_METHODS = ("profiler", "graph")
# A forward that launches a kernel cannot complete faster than this per call on any current GPU
# (a launch of an empty kernel takes > 1 us on H100/MI300X); below it the numbers are not real.
MIN_PLAUSIBLE_MS = 0.0003
CALL_ANNOTATION = "amdkv_call"
FLUSH_ANNOTATION = "amdkv_flush"


def _sync(torch: Any) -> None:
    torch.cuda.synchronize()


class _Counted:
    """Wraps the timed function and counts its invocations (for the wall-clock cross-check)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.fn()


# ------------------------------------------------------------------------------------ methods
def time_events(fn: Callable[[], Any], *, flush: Any, reps: int = 50, warmup: int = 5) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    _sync(torch)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    _sync(torch)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_graph(fn: Callable[[], Any], *, flush: Any, calls: int = 20, reps: int = 20) -> list[float]:
    """Per-call time from replaying a graph of `calls` back-to-back calls (one flush per replay)."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    _sync(torch)
    samples = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        graph.replay()
        e.record()
        _sync(torch)
        samples.append(s.elapsed_time(e) / calls)
    return samples


def time_profiler(fn: Callable[[], Any], *, flush: Any, reps: int = 100, warmup: int = 3,
                  gpu_section: Callable[[], Any] = contextlib.nullcontext) -> list[float]:
    """Per-call kernel time (ms) from torch.profiler's kernel trace, cache flushed before each call.

    Each call runs inside a `record_function(CALL_ANNOTATION)` range; a kernel belongs to the call
    whose range contains the CPU-side launch of that kernel (linked by the trace's correlation id),
    so the flush kernels, which are launched outside those ranges, are never counted.
    Only the calls run inside `gpu_section` (the timing lock): exporting and parsing the trace is
    CPU work and would otherwise keep the GPU from the next candidate for a few hundred ms.
    """
    with gpu_section():
        prof = _profile_calls(fn, flush=flush, reps=reps, warmup=warmup)
    per_call = kernel_ms_per_call(_export_trace(prof))
    if len(per_call) != reps:
        raise RuntimeError(f"profiler trace has {len(per_call)} call ranges, expected {reps}")
    if any(t <= 0 for t in per_call):
        raise RuntimeError("profiler trace attributes no kernel to some calls")
    return per_call


@contextmanager
def _kernel_profiler() -> Iterator[Any]:
    """A torch.profiler session with CPU and GPU activities, without torch's warning that a second
    session in one process starts empty (that is what we want: spares pre-warm with a first one)."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events.*")
        prof.__enter__()
    try:
        yield prof
    finally:
        prof.__exit__(None, None, None)


def _profile_calls(fn: Callable[[], Any], *, flush: Any, reps: int, warmup: int) -> Any:
    import torch
    from torch.profiler import record_function

    for _ in range(warmup):
        fn()
    _sync(torch)
    with _kernel_profiler() as prof:
        for _ in range(reps):
            with record_function(FLUSH_ANNOTATION):
                flush.zero_()
            with record_function(CALL_ANNOTATION):
                fn()
        _sync(torch)
    return prof


def _export_trace(prof: Any) -> dict[str, Any]:
    fd, path = tempfile.mkstemp(prefix="amdkv-trace-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as fh:
            return json.load(fh)
    finally:
        with contextlib.suppress(OSError):  # already gone: nothing left to clean up
            os.unlink(path)


def prewarm_profiler(device: str) -> None:
    """Start and stop one tiny profiler session, so that the profiler back end (CUPTI/kineto on
    NVIDIA, roctracer/rocprofiler-sdk on ROCm) is initialised while a spare worker waits for work,
    not inside a candidate's timed section, which holds the GPU's timing lock."""
    import torch

    with _kernel_profiler():
        torch.empty(16, device=device).zero_()
        _sync(torch)


def kernel_ms_per_call(trace: dict[str, Any], call_name: str = CALL_ANNOTATION) -> list[float]:
    """From a Chrome trace exported by torch.profiler (kineto): per call range, the summed
    duration in ms of the GPU kernels launched inside it.

    The format (kineto's): `traceEvents` with `ph: "X"`, `ts`/`dur` in microseconds, `cat` of
    `user_annotation` (our record_function ranges on the CPU), `cuda_runtime`/`cuda_driver`
    (launch calls, HIP API calls are reported under the same categories on ROCm) and `kernel`
    (GPU executions); launches and kernels carry the same `args.correlation`.
    """
    events = trace if isinstance(trace, list) else trace.get("traceEvents", [])
    calls = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
                   for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                   and e.get("name") == call_name)
    launches: dict[Any, float] = {}
    kernels: list[tuple[Any, float]] = []
    for e in events:
        if e.get("ph") != "X":
            continue
        corr = (e.get("args") or {}).get("correlation")
        if corr is None:
            continue
        cat = e.get("cat", "")
        if cat == "kernel":
            kernels.append((corr, float(e.get("dur", 0.0))))
        elif cat in ("cuda_runtime", "cuda_driver", "hip_runtime", "runtime", "driver"):
            launches[corr] = float(e["ts"])
    starts = [c[0] for c in calls]
    totals = [0.0] * len(calls)
    import bisect

    for corr, dur in kernels:
        ts = launches.get(corr)
        if ts is None:
            continue
        i = bisect.bisect_right(starts, ts) - 1
        if i >= 0 and ts <= calls[i][1]:
            totals[i] += dur
    return [t / 1000.0 for t in totals]


# -------------------------------------------------------------------------------------- lock
def timing_lock_path(key: str) -> str:
    """The per-GPU lock file for `key` (a GPU's UUID or PCI bus id where known, else cuda:N)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in key)
    return os.path.join(tempfile.gettempdir(), f"amdkv-timing-{safe}.lock")


@contextmanager
def exclusive_gpu() -> Iterator[None]:
    """Hold the per-GPU timing lock (the file named by the worker's `timing_lock` setting) while timing.

    Several workers may verify on one GPU at once; only timing needs the GPU alone, so
    correctness work overlaps freely and timed sections queue on this lock. The pool names the
    lock after the physical GPU (UUID), so two verifiers that see the GPU under different
    indices still exclude each other.
    """
    path = worker_settings().timing_lock
    if not path:
        yield
        return
    with exclusive_file_lock(path):
        yield


# ------------------------------------------------------------------------------------ measure
def _choice(value: str | None, default: str, allowed: tuple[str, ...]) -> str:
    value = str(value or default).strip().lower()
    return value if value in allowed else default


def measure(fn: Callable[[], Any], *, flush_nbytes: int, device: str, method: str | None = None) -> dict[str, Any]:
    """Median kernel time of `fn` in ms with its spread, the method used, and the call count.

    The GPU runs hold the per-GPU timing lock (`exclusive_gpu`); the time spent waiting for it is
    returned as `lock_wait_s` and the time it was held as `lock_held_s`."""
    section = _LockedSection()
    res = _measure(fn, flush_nbytes=flush_nbytes, device=device, method=method, gpu_section=section)
    res["lock_wait_s"], res["lock_held_s"] = section.wait_s, section.held_s
    return res


class _LockedSection:
    """A re-enterable-in-sequence `exclusive_gpu()` that adds up its wait and hold times."""

    def __init__(self) -> None:
        self.wait_s = 0.0
        self.held_s = 0.0

    @contextmanager
    def __call__(self) -> Iterator[None]:
        t0 = time.monotonic()
        with exclusive_gpu():
            t1 = time.monotonic()
            self.wait_s += t1 - t0
            try:
                yield
            finally:
                self.held_s += time.monotonic() - t1


def _spread(samples: list[float]) -> float:
    med = statistics.median(samples)
    if len(samples) < 10 or med <= 0:
        return 0.0
    q = statistics.quantiles(samples, n=10)
    return (q[-1] - q[0]) / med


def _measure(fn: Callable[[], Any], *, flush_nbytes: int, device: str, method: str | None = None,
             gpu_section: Callable[[], Any] = contextlib.nullcontext) -> dict[str, Any]:
    import torch

    settings = worker_settings()
    method = method or _choice(settings.timing_method, "auto", METHODS)
    small_method = _choice(settings.small_kernel_method, "profiler", SMALL_METHODS)
    threshold = float(settings.small_kernel_ms or SMALL_KERNEL_MS)
    counted = _Counted(fn)
    flush = torch.empty(flush_nbytes // 4, dtype=torch.int32, device=device)
    t0 = time.monotonic()
    extra: dict[str, Any] = {}
    notes: list[str] = []
    if method in ("auto", "events"):
        with gpu_section():
            samples = time_events(counted, flush=flush)
        used = "cuda_events+l2_flush"
        extra["events_ms"] = statistics.median(samples)
        if method == "auto" and extra["events_ms"] < threshold:
            order = [small_method] + [m for m in SMALL_METHODS if m != small_method]
            for m in order:
                try:
                    samples, used = _run_small(m, counted, flush, gpu_section)
                    break
                except Exception as exc:  # noqa: BLE001 - fall back, and say so in the method
                    notes.append(f"{m}_failed:{type(exc).__name__}")
            else:
                used = "cuda_events+l2_flush"
    else:
        samples, used = _run_small(method, counted, flush, gpu_section)
    if notes:
        used += "(" + ",".join(notes) + ")"
    del flush
    _sync(torch)
    med = statistics.median(samples)
    res = {"ms": med, "spread": _spread(samples), "samples": len(samples), "method": used,
           "calls": counted.calls, "loop_wall_s": time.monotonic() - t0}
    res.update(extra)
    return res


def _run_small(method: str, fn: Callable[[], Any], flush: Any,
               gpu_section: Callable[[], Any] = contextlib.nullcontext) -> tuple[list[float], str]:
    if method == "profiler":
        return time_profiler(fn, flush=flush, gpu_section=gpu_section), "profiler_kernel_trace+l2_flush"
    with gpu_section():
        if method == "graph":
            return time_graph(fn, flush=flush), "graph_replay+l2_flush"
        if method == "events":
            return time_events(fn, flush=flush), "cuda_events+l2_flush"
    raise ValueError(f"unknown timing method {method!r}; use one of {METHODS}")


def check_consistency(timing: dict[str, Any], parent_wall_s: float | None, *, slack: float = 1.5,
                      abs_slack_s: float = 0.01) -> str | None:
    """Cross-check a child's reported timing against wall clocks; None when it is plausible.

    The child reports the median per-call time `ms`, the number of calls it made while timing
    (`calls`) and its own wall time around the timed loop (`wall_s`); the parent knows how long
    the whole child process ran (`parent_wall_s`, its own clock). Impossible reports:
    a non-finite or non-positive time, one below MIN_PLAUSIBLE_MS (faster than any kernel
    launch can complete), kernel time x calls above the loop's wall time (the calls run one after
    another on one stream, so their kernels fit inside the loop), and a loop longer than the
    process that ran it. The wall clock bounds kernel time from above only; claims of speed are
    bounded from below by the roofline floor (verifier) and by MIN_PLAUSIBLE_MS.
    """
    ms = timing.get("ms")
    if ms is None:
        return None
    if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        return f"reported time {ms!r} ms is not a positive number"
    if ms < MIN_PLAUSIBLE_MS:
        return (f"reported {ms * 1e3:.3g} us per call is below {MIN_PLAUSIBLE_MS * 1e3:.3g} us, faster than any "
                "kernel launch completes")
    wall = timing.get("loop_wall_s", timing.get("wall_s"))
    calls = timing.get("calls")
    if isinstance(wall, (int, float)) and isinstance(calls, int) and calls > 0:
        kernel_s = ms * calls / 1000.0
        if kernel_s > wall * slack + abs_slack_s:
            return (f"reported {ms:.4g} ms x {calls} calls = {kernel_s:.3f} s of kernel time, but the timed loop "
                    f"took {wall:.3f} s of wall time")
    if isinstance(wall, (int, float)) and parent_wall_s is not None and wall > parent_wall_s * 1.05 + abs_slack_s:
        return (f"the child reports a timed loop of {wall:.3f} s, longer than its whole process ran "
                f"({parent_wall_s:.3f} s by the parent's clock)")
    return None
