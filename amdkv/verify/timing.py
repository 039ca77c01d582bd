"""Kernel timing on GPUs (CUDA and ROCm share this code through torch.cuda).

Method: warm-up; before every timed run the last-level cache is flushed with a buffer twice its
size (gpu_specs); each timed sample is bracketed by device events; many samples; median and
spread. Kernels that take under SMALL_KERNEL_MS per call are timed by CUDA/HIP graph replay of
many calls instead, because per-call events then mostly measure launch overhead (measured on an
H200: events read 4-13x the kernel time for 3-9 us kernels). The method is recorded with the
numbers. Only used on GPU platforms; nothing here runs on the CPU interpreter.
"""

from __future__ import annotations

import fcntl
import os
import statistics
from contextlib import contextmanager
from typing import Any, Callable, Iterator

SMALL_KERNEL_MS = 0.1


def _sync(torch: Any) -> None:
    torch.cuda.synchronize()


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


@contextmanager
def exclusive_gpu() -> Iterator[None]:
    """Hold the per-GPU timing lock (a file lock named by AMDKV_TIMING_LOCK) while timing.

    Several workers may verify on one GPU at once; only timing needs the GPU alone, so
    correctness work overlaps freely and timed sections queue on this lock.
    """
    path = os.environ.get("AMDKV_TIMING_LOCK")
    if not path:
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def measure(fn: Callable[[], Any], *, flush_nbytes: int, device: str) -> dict[str, Any]:
    """Median kernel time of `fn` in ms with its spread and the method used."""
    with exclusive_gpu():
        return _measure(fn, flush_nbytes=flush_nbytes, device=device)


def _measure(fn: Callable[[], Any], *, flush_nbytes: int, device: str) -> dict[str, Any]:
    import torch

    flush = torch.empty(flush_nbytes // 4, dtype=torch.int32, device=device)
    samples = time_events(fn, flush=flush)
    method = "cuda_events+l2_flush"
    if statistics.median(samples) < SMALL_KERNEL_MS:
        try:
            samples = time_graph(fn, flush=flush)
            method = "graph_replay+l2_flush"
        except Exception:  # not capturable (host sync inside): events stay, and say so
            method = "cuda_events+l2_flush(graph_capture_failed)"
    del flush
    med = statistics.median(samples)
    spread = (statistics.quantiles(samples, n=10)[-1] - statistics.quantiles(samples, n=10)[0]) / med \
        if len(samples) >= 10 and med > 0 else 0.0
    return {"ms": med, "spread": spread, "samples": len(samples), "method": method}
