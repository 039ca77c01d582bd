"""Run a command in its own process group with a wall-clock timeout and a memory cap, and what every
child process shares however it was started (its result, the PYTHONPATH that makes it import this
same amdkv). Standard library only.

Every untrusted piece of work (a candidate, a compile of a candidate's kernels) runs through here:
on timeout or crash the whole group is killed, so grandchildren (compilers, helper processes) never
outlive the verdict. Used by the verifier (`amdkv.verify.sandbox` re-exports these names and adds the
fork-or-exec `run_python_module`) and by the HIP toolchain (`amdkv.toolchain`: hipcc, the chroot).
It lives below both so that the toolchain does not import the verifier (issue 20: the verifier's HIP
backend drives the toolchain, so the other direction made a package cycle; docs/import_graph.md).
Exec'd children come from `run_process`, forked ones from `amdkv.verify.fork_server.run_module`;
both return a `ProcessResult`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import signal
import subprocess
import threading
import time
from typing import Mapping, Sequence

CANCEL_POLL_S = 0.1  # how often a cancellable run_process looks at its event


@dataclasses.dataclass
class ProcessResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    cancelled: bool = False  # stopped because the caller's `cancel` event was set (run_process)
    # died by SIGKILL while the host's out-of-memory killer ran: why, else None (verify/host_oom.py;
    # set by verify.pool.Spare.run for every worker)
    host_oom: str | None = None

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that killed the process (e.g. SIGSEGV), if one did."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


def package_root() -> str:
    """The folder that holds the `amdkv` package, so every worker imports the same code."""
    from pathlib import Path

    import amdkv

    return str(Path(amdkv.__file__).resolve().parent.parent)


def with_package_on_path(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` whose PYTHONPATH starts with package_root()."""
    out = dict(env)
    rest = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join([package_root()] + rest)
    return out


def cap_host_memory(host_memory_bytes: int | None) -> None:
    """Cap this process's host memory at `host_memory_bytes` of data (RLIMIT_DATA: the heap and
    private writable mappings, which every allocation of a candidate's tensors, NumPy arrays and
    Python objects is), and forbid core dumps. None or 0: no memory cap.

    Why the data segment and not the address space (RLIMIT_AS, used on `cpu` before session 28):
    address space also counts what a process maps without using it. CUDA torch's libraries take
    gigabytes of it at import, before any GPU is touched, and GPU runtimes reserve huge ranges. On
    the H100 image, the 8-GiB address-space cap on `cpu` left a candidate less than 256 MiB, so a
    correct candidate's allocation failed as `runtime_error`/`oom`: a verdict that depended on which
    torch build was installed. GPU workers' host memory (AMDKV_GPU_HOST_MEM_GIB) was already capped
    this way (through the OS sandbox), and so was the HIP capture since session 18. What it does not
    count, shared mappings, is docs/sandbox.md's to say."""
    if host_memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (host_memory_bytes, host_memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing candidates


def memory_cap_preexec(host_memory_bytes: int | None):
    """A preexec_fn that applies cap_host_memory(host_memory_bytes) in the child before it execs."""

    def _apply() -> None:
        cap_host_memory(host_memory_bytes)

    return _apply


def forked_worker_signals() -> None:
    """A forked pool process's first step (`initializer=`): SIGTERM back to its default, SIGINT ignored.

    Why: a fork inherits the parent's Python signal handlers, and a pool ends its processes with
    SIGTERM (`multiprocessing.Pool.terminate`, which its `with` block always calls). A handler that
    does not exit there leaves the pool's shutdown waiting forever. Ray installs one in every process
    that started a Ray node or driver (it drains the node over gRPC, which hangs in a fork): the
    dataset build hung for 20 minutes in CI after the Ray tests had run in the same process. SIGINT
    (Ctrl-C reaches the whole process group) is the parent's to handle: it stops or terminates the pool.
    """
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of `proc` (it was started with start_new_session=True)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already: nothing to kill
        os.killpg(proc.pid, signal.SIGKILL)


def run_process(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
                cwd: str | None = None, host_memory_bytes: int | None = None,
                stdin_text: str | None = None, cancel: threading.Event | None = None) -> ProcessResult:
    """Run `argv` to completion or until `timeout` seconds; always reaps the process group.

    `cancel`: when the event is set while the command runs, its group is killed and the result says
    `cancelled` (within CANCEL_POLL_S). Why: parallel compiles of one build whose answer is already
    known (another unit failed) need not run to the end (hip_build.compile_units)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=memory_cap_preexec(host_memory_bytes),
    )
    timed_out = cancelled = False
    try:
        out, err = _communicate(proc, stdin_text, start + timeout, cancel)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out, cancelled = cancel is None or not cancel.is_set(), cancel is not None and cancel.is_set()
    finally:
        kill_group(proc)  # grandchildren left behind die with the group
    return ProcessResult(proc.returncode, out or "", err or "", timed_out, time.monotonic() - start, cancelled)


def _communicate(proc: subprocess.Popen, stdin_text: str | None, deadline: float,
                 cancel: threading.Event | None) -> tuple[str, str]:
    """proc.communicate until `deadline`, in CANCEL_POLL_S slices when `cancel` is given (retrying
    communicate after its TimeoutExpired loses no output, per the subprocess docs); TimeoutExpired
    past the deadline or once `cancel` is set."""
    if cancel is None:
        return proc.communicate(stdin_text, timeout=max(0.0, deadline - time.monotonic()))
    text = stdin_text
    while True:
        left = deadline - time.monotonic()
        if cancel.is_set() or left <= 0:
            raise subprocess.TimeoutExpired(proc.args, 0)
        try:
            return proc.communicate(text, timeout=min(CANCEL_POLL_S, left))
        except subprocess.TimeoutExpired:
            text = None  # stdin was written (and closed) by the first call
