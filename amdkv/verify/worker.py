"""Entry point of the verifier's worker processes: `python -m amdkv.verify.worker`.

A worker starts ahead of need (a *spare*): it imports torch and triton (or is forked by the fork
server that imported them, fork_server.py), initialises the device, says READY and blocks on one
JSON job (stdin, or its channel when forked). It runs that single job, writes its report and exits;
it is never reused, so whatever a candidate does to the process dies with it. Job and report are
the typed messages of worker_protocol.py (`ReferenceJob`/`CandidateJob` in, `WorkerReport` out).

Two kinds of job:
- `reference`: load the (trusted) task, draw seeded inputs per case, run the eager `Model` at
  the task's dtype (TF32 off) and a float64 golden, write inputs and expected outputs to the
  reference cache. The candidate is never in this process.
- `candidate`: load the inputs file it was given, install the runtime guards, import the
  candidate, run `ModelNew` on every trial with the checks on, write outputs for the parent.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import time
import traceback
from typing import Any

from amdkv.verify.gpu_memory import effective_gpu_mem_fraction
from amdkv.verify.launch_options import drop_amd_options_on_nvidia
from amdkv.verify.phase_clock import PhaseClock, process_cpu_s
from amdkv.verify.worker_protocol import (CandidateJob, CandidateResult, ReferenceResult, WorkerFailure, WorkerJob,
                                          WorkerReport, WorkerSettings, job_from_json, report_path_of,
                                          worker_settings)


READY_LINE = "READY\n"  # started up, waiting for the job
DONE_LINE = "AMDKV-WORKER-DONE\n"  # after the report file is complete (see pool.Spare.run)


class _StartupParts:
    """Wall and CPU seconds of each start-up step, reported with the job (verdict timings
    `worker_startup_<part>_s` / `_cpu_s`): which step of a spare's start-up costs the host what."""

    def __init__(self) -> None:
        self.clock = PhaseClock()
        self.flags: dict[str, float] = {}  # what start-up found (reported beside the seconds)

    def step(self, name: str, fn: Any, *args: Any) -> Any:
        with self.clock.phase(name):
            return fn(*args)

    @property
    def parts(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in self.clock.wall:
            out[f"{name}_s"] = round(self.clock.wall[name], 4)
            out[f"{name}_cpu_s"] = round(self.clock.cpu[name], 4)
        return {**out, **self.flags}


# CU_CTX_SCHED_BLOCKING_SYNC: a thread waiting for the GPU sleeps on a driver event instead of
# spinning (CUDA's default spins while there are fewer contexts than cores). Tried because the
# H200's checked calls used 2.2 CPU-seconds per wall second; the one run with it showed no CPU
# change, and could not tell whether the driver took the flag (verdicts now say: docs/gpu.md,
# Session 7). Timing is unaffected: kernel times come from GPU-side events or the profiler's
# trace, and the wall-clock cross-check only bounds them from above.
_CU_CTX_SCHED_BLOCKING_SYNC = 0x4


def reset_gpu_peak() -> None:
    """Start the job's GPU peak from what the process holds now (a spare's warm-up is not the job's).
    Nothing on a process that never initialised CUDA: the CPU platform stays without it."""
    import torch

    with contextlib.suppress(Exception):  # a number for reading must never cost the job its report
        if torch.cuda.is_initialized():
            for i in range(torch.cuda.device_count()):
                torch.cuda.reset_peak_memory_stats(i)


def gpu_peak_bytes() -> int:
    """The job's peak of PyTorch-allocated GPU memory, summed over the process's devices; 0 without CUDA.
    Why: session 25's `45_Average_Pooling_2D` ran out of memory through the verifier's own copies, and the
    re-run after the fix could not say how much room it had made (verdict timing `worker_gpu_peak_gib`)."""
    import torch

    try:
        if not torch.cuda.is_initialized():
            return 0
        return sum(torch.cuda.max_memory_allocated(i) for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001 - (after a sticky device error, say) the report goes without the number
        return 0


def _set_blocking_sync(device: str) -> bool:
    """Set the primary context's scheduling flag through the driver API before torch creates the
    context (NVIDIA only; ROCm's hipSetDeviceFlags is not called: not measured on AMD hardware).
    False when the driver refused or was not found: the worker then runs with CUDA's default."""
    import ctypes

    import torch

    if torch.version.hip is not None or not device.startswith("cuda"):
        return False
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        ordinal = torch.device(device).index or 0
        dev = ctypes.c_int()
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
            return False
        return cuda.cuDevicePrimaryCtxSetFlags(dev, _CU_CTX_SCHED_BLOCKING_SYNC) == 0
    except (OSError, AttributeError):
        return False


def _create_cuda_context(settings: WorkerSettings) -> bool | None:
    """Create this worker's CUDA context; returns whether blocking sync was set (None: not asked)."""
    import torch

    device = settings.device
    blocking = _set_blocking_sync(device) if settings.blocking_sync else None
    torch.cuda.set_device(torch.device(device))
    torch.empty(1, device=device)  # create the context now, not inside the timed job
    # The pool shows a GPU worker only its own GPU (platform.worker_gpu_env). Check that the
    # driver honoured it: a worker that saw every GPU would run on GPU 0 while holding another
    # GPU's timing lock. Failing here fails the spare's start-up, loudly, before any candidate.
    expected = settings.visible_gpus
    if expected and torch.cuda.device_count() != int(expected):
        raise RuntimeError(f"this worker sees {torch.cuda.device_count()} GPU(s), expected {expected}: "
                           "the GPU visibility setting did not reach the GPU runtime")
    return blocking


def _load_triton_driver() -> None:
    # Triton's GPU driver object compiles and loads its C helpers (a gcc run) the first time it is
    # used. Do it here, before the job: a candidate whose autotuner touches the driver outside a
    # launch would otherwise start gcc itself (a sandbox violation), and the job would pay for it.
    import triton

    triton.runtime.driver.active.get_current_device()
    _set_scratch_allocator(triton)


def _set_scratch_allocator(triton: Any) -> None:
    """Kernels that build tensor descriptors on the device (`tl.make_tensor_descriptor`, TMA on
    Hopper) ask Triton for global scratch at launch and fail with "no allocator was set" unless
    the program installed one: a correct kernel must not fail for want of what any real caller
    sets up (found on the H200: ok_descriptor_edges.py was a `compile_error`). Scratch comes from
    torch's caching allocator on the worker's device, so it counts against the worker's GPU memory
    fraction like any other allocation; a candidate that installs its own allocator replaces it."""
    import torch

    def allocate(size: int, alignment: int, stream: Any) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    setter = getattr(triton, "set_allocator", None)
    if setter is not None:
        setter(allocate)


def _prewarm_profiler(device: str) -> None:
    from amdkv.verify.timing import prewarm_profiler

    try:
        prewarm_profiler(device)
    except Exception as exc:  # noqa: BLE001 - a spare without a profiler still works (events/graph)
        sys.stderr.write(f"amdkv worker: profiler pre-warm failed: {type(exc).__name__}: {exc}\n")


def _prepare_device(settings: WorkerSettings, parts: _StartupParts) -> None:
    import torch

    device = settings.device
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if device.startswith("cuda"):
        blocking = parts.step("cuda_context", _create_cuda_context, settings)
        if blocking is not None:  # verdict timings `worker_startup_blocking_sync`: 1 set, 0 refused
            parts.flags["blocking_sync"] = 1.0 if blocking else 0.0
        parts.step("triton_driver", _load_triton_driver)
        if settings.prewarm_profiler:
            parts.step("profiler", _prewarm_profiler, device)


def _apply_gpu_memory_cap(job: WorkerJob, settings: WorkerSettings) -> float | None:
    """Per-candidate GPU memory cap (the pool's `gpu_mem_fraction` setting); returns the fraction
    applied, None when none was.

    Only candidate jobs are capped; torch's caching allocator then raises OutOfMemoryError past
    the cap, which the candidate job reports as runtime_error / oom.
    """
    frac, device = settings.gpu_mem_fraction, settings.device
    if not isinstance(job, CandidateJob) or not frac or not device.startswith("cuda"):
        return None
    import torch

    total = torch.cuda.get_device_properties(torch.device(device)).total_memory
    frac = effective_gpu_mem_fraction(float(frac), job.gpu_mem_floor_bytes, total)
    torch.cuda.set_per_process_memory_fraction(frac, torch.device(device))
    return frac


class _StdioChannel:
    """The exec'd worker's link to the parent: READY/DONE lines on stdout, the job on stdin."""

    def say(self, line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()

    def read_job(self) -> str | None:
        return sys.stdin.readline() or None


class _ConnectionChannel:
    """The forked worker's link to the parent (pool.ForkedWorkerProcess): one socket carrying
    multiprocessing Connection messages. Its stdout and stderr are files in the work dir."""

    def __init__(self, fd: int) -> None:
        from multiprocessing.connection import Connection

        self.conn = Connection(fd)

    def say(self, line: str) -> None:
        self.conn.send_bytes(line.encode())

    def read_job(self) -> str | None:
        try:
            return self.conn.recv_bytes().decode()
        except (EOFError, OSError):
            return None


def serve(channel: Any, forked: bool = False) -> int:
    """Start up, say READY, run one job, write its report, say DONE, exit without teardown."""
    # A worker killed by SIGSEGV/SIGABRT/SIGBUS leaves no report: the Python stack in its stderr is
    # then the only evidence of where (a reference worker died with rc -11 and nothing else on the
    # H200, session 8). It goes to the worker's stderr file, whose tail the verdict keeps.
    faulthandler.enable(all_threads=True)
    # Read first: settings that cannot be read (ProtocolError, naming the field) fail the spare's
    # start-up, which the parent reports as a harness failure (infra_error) with this line.
    try:
        settings = worker_settings()
    except ValueError as exc:  # ProtocolError, or JSON cut short
        sys.stderr.write(f"amdkv worker: unreadable settings: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(2)
    t0 = time.monotonic()
    import torch  # noqa: F401  - the point of a spare is to have paid for these imports

    # a forked worker's thread count was fixed when the fork server imported torch: set its own
    threads = settings.worker_threads or (os.environ.get("OMP_NUM_THREADS") if forked else None)
    if threads:  # many workers share the host: each one's CPU-side copies need not use every core
        torch.set_num_threads(max(1, int(threads)))
    import triton  # noqa: F401
    import triton.language  # noqa: F401

    from amdkv.verify import worker_jobs  # noqa: F401

    parts = _StartupParts()
    _prepare_device(settings, parts)
    startup_s = time.monotonic() - t0
    channel.say(READY_LINE)
    line = channel.read_job()
    if not line:
        os._exit(0)  # the pool shut down before giving this spare work
    t_job, cpu_job = time.monotonic(), process_cpu_s()  # monotonic: one clock for all processes (Linux)
    reset_gpu_peak()
    report_path = report_path_of(line)
    result: ReferenceResult | CandidateResult | None = None
    fatal: WorkerFailure | None = None
    try:
        prepare = PhaseClock(("prepare",))  # the job's set-up before its own phases (worker_jobs)
        with prepare.phase("prepare"):
            job = job_from_json(line)
            _apply_gpu_memory_cap(job, settings)
            # reference and candidate jobs alike, before a candidate job's LaunchCounter wraps Triton's
            # launch (so its AMD-compile capture still sees the AMD options): launch_options.py
            drop_amd_options_on_nvidia(job.device)
        result = worker_jobs.run_candidate_job(job) if isinstance(job, CandidateJob) else \
            worker_jobs.run_reference_job(job)
        if isinstance(result, CandidateResult):  # verdict timings worker_prepare_s (_cpu_s, _children_cpu_s)
            from amdkv.verify.triton_launchers import plain_signatures

            result.launcher_signatures = plain_signatures(result.launcher_signatures)
            result.phase_s.update(prepare.wall)
            result.phase_cpu_s.update(prepare.cpu)
            result.phase_children_cpu_s.update(prepare.children_cpu)
    except BaseException as exc:  # noqa: BLE001 - everything must be reported to the parent
        fatal = WorkerFailure(error_type=type(exc).__name__, error=str(exc)[:2000],
                              traceback=traceback.format_exc()[-6000:],
                              file_size_limit_bytes=getattr(exc, "limit_bytes", None))
    from amdkv.verify.os_sandbox import APPLIED

    job_s = time.monotonic() - t_job
    cpu_s = process_cpu_s()  # the whole worker's host CPU (start-up and job, gcc/ptxas included)
    report = WorkerReport(result=result, fatal=fatal, startup_s=startup_s, startup_parts=parts.parts,
                          sandbox=dict(APPLIED),  # what the OS sandbox of this process holds (empty: none entered)
                          job_s=job_s, cpu_s=cpu_s, job_cpu_s=cpu_s - cpu_job, gpu_peak_bytes=gpu_peak_bytes(),
                          job_received_at=t_job,
                          reported_at=time.monotonic())
    tmp = report_path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(report.to_json())
    os.replace(tmp, report_path)
    sys.stdout.flush()
    sys.stderr.flush()
    # DONE tells the parent the report is complete: it judges now and kills this process group
    # instead of waiting for the exit, whose GPU context teardown is not the candidate's time.
    channel.say(DONE_LINE)
    os._exit(0)  # skip interpreter teardown: a candidate's atexit hooks never run


def main() -> int:
    """`python -m amdkv.verify.worker`: the exec'd spare (pool.ExecWorkerProcess)."""
    return serve(_StdioChannel())


def serve_forked(channel_fd: int) -> None:
    """Entry of a worker forked by the fork server (fork_server.py), after it isolated the child
    (own session, environment, work dir, stdout/stderr files, limits): the job loop over the
    socket `channel_fd` instead of stdin/stdout."""
    serve(_ConnectionChannel(channel_fd), forked=True)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
