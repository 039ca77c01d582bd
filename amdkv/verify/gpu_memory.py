"""How much GPU memory a candidate may use: one policy, read by the pool (the share) and by the worker
(the cap it applies). Standard library only: the worker imports it before torch has a device.

A candidate gets a share of the GPU when several run at once (`gpu_mem_fraction`; by default 0.85 split
over the concurrent candidates, 15% kept for the reference worker, the CUDA contexts and the cache-flush
buffers). Past its cap torch's allocator raises, and the verdict is runtime_error / oom. The share alone
made verdicts depend on --jobs: with 8 jobs on an H100 (8.4 GB each) ROCmBench's flash-attention test,
the benchmark's own code, ran as its (uncapped) reference and failed as a candidate (2026-12-05). So a
candidate may always use REFERENCE_NEED_MULTIPLE times what its reference needed
(worker_jobs.GpuNeed), even past its share, and never more than MAX_GPU_MEM_FRACTION of the device.
"""

from __future__ import annotations

REFERENCE_NEED_MULTIPLE = 2.0
MAX_GPU_MEM_FRACTION = 0.95
OUT_OF_MEMORY_TYPES = ("OutOfMemoryError", "MemoryError")
# "status_alloc_failed": a BLAS/DNN library that cannot allocate its handle or workspace on a full GPU
# (torch: "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"; hipBLAS and
# cuDNN name theirs the same way)
# the host's: ENOMEM's text (a refused mmap or brk under the worker's host-memory cap) and torch's CPU
# allocator ("DefaultCPUAllocator: can't allocate memory")
HOST_OUT_OF_MEMORY_TEXTS = ("cannot allocate memory", "can't allocate memory")
OUT_OF_MEMORY_TEXTS = ("out of memory", "status_alloc_failed") + HOST_OUT_OF_MEMORY_TEXTS


def says_out_of_memory(text: str) -> bool:
    """Whether an error's text says memory ran out: a CUDA/HIP "out of memory" raised as any type
    (AcceleratorError too), a BLAS library's failed allocation, or a refused host allocation under
    the worker's memory cap. One rule for
    candidates (runtime_error / oom, worker_jobs) and references (retried alone, references.py)."""
    lowered = text.lower()
    return any(t in lowered for t in OUT_OF_MEMORY_TEXTS)


def is_out_of_memory(type_name: str, text: str) -> bool:
    """An error reported by name and text (a worker's report): torch's OutOfMemoryError, the host's
    MemoryError, or a text that says so."""
    return type_name in OUT_OF_MEMORY_TYPES or says_out_of_memory(text)


def is_host_out_of_memory(type_name: str, text: str) -> bool:
    """Whether an out-of-memory error (is_out_of_memory) is the host's, not a device's: Python's
    MemoryError, or a text that names a refused host allocation and no device. Why: the notes a
    device OOM gets (the candidate's GPU share, the verifier's own copies on the device) say nothing
    about a host allocation, and read as the cause (session 28's fault suite: the `host OOM` row
    carried both). The verdict is `runtime_error`/`oom` either way."""
    if type_name == "MemoryError":
        return True
    lowered = text.lower()
    return any(t in lowered for t in HOST_OUT_OF_MEMORY_TEXTS) and "out of memory" not in lowered


def default_gpu_mem_fraction(concurrent: int) -> float:
    """Share of a GPU's memory one candidate may use when `concurrent` candidates share the GPU
    (15% kept for the reference worker, the CUDA contexts and the cache-flush buffers)."""
    return round(max(0.05, 0.85 / max(1, concurrent)), 4)


def candidate_floor_bytes(reference_need_bytes: list[int]) -> int:
    """The GPU memory a candidate may use whatever its share: twice the most its reference needed on
    any of the candidate's cases (0 when the reference ran on no GPU)."""
    return int(REFERENCE_NEED_MULTIPLE * max(reference_need_bytes, default=0))


def effective_gpu_mem_fraction(share: float, floor_bytes: int, total_bytes: int) -> float:
    """The fraction of the GPU a candidate is capped at: its share, raised to `floor_bytes` where that
    is more, at most MAX_GPU_MEM_FRACTION. A candidate that needs what its reference needs is judged
    on what it computes, whatever --jobs is; one that needs far more than its reference still meets
    the cap."""
    floor = floor_bytes / total_bytes if total_bytes > 0 else 0.0
    return round(min(MAX_GPU_MEM_FRACTION, max(0.01, share, floor)), 4)
