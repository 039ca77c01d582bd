"""Run a command in its own process group with a wall-clock timeout and a memory cap.

Every untrusted piece of work (a candidate, a compile of a candidate's kernels) runs through
here: on timeout or crash the whole group is killed, so grandchildren (compilers, helper
processes) never outlive the verdict.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import time
from typing import Any, Mapping, Sequence

# Re-exported: callers import them from here (the process primitives' home before child_process.py).
from amdkv.verify.child_process import ProcessResult, package_root, with_package_on_path  # noqa: F401


def memory_cap_preexec(max_address_space_bytes: int | None):
    """A preexec_fn that caps the child's address space (RLIMIT_AS).

    Only used on CPU platforms: CUDA and ROCm runtimes reserve huge virtual ranges, so an
    address-space cap breaks GPU processes; there the GPU memory cap is enforced instead.
    """

    def _apply() -> None:
        if max_address_space_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (max_address_space_bytes, max_address_space_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core dumps from crashing candidates

    return _apply


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of `proc` (it was started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
                cwd: str | None = None, max_address_space_bytes: int | None = None,
                stdin_text: str | None = None) -> ProcessResult:
    """Run `argv` to completion or until `timeout` seconds; always reaps the process group."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=memory_cap_preexec(max_address_space_bytes),
    )
    try:
        out, err = proc.communicate(stdin_text, timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    finally:
        kill_group(proc)  # grandchildren left behind die with the group
    return ProcessResult(proc.returncode, out or "", err or "", timed_out, time.monotonic() - start)


def python_module_argv(module: str, args: Sequence[str] = (), sandbox: Any = None) -> list[str]:
    """The command line of `python -m MODULE ARGS`, confined by `sandbox` (an os_sandbox.SandboxPlan)
    when given: then the launcher `python -m amdkv.verify.os_sandbox run PLAN MODULE ARGS` enters
    the sandbox while it is single-threaded and runs the module in the same interpreter."""
    import sys

    if sandbox is None:
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-m", "amdkv.verify.os_sandbox", "run", sandbox.to_json(), module, *args]


def run_python_module(module: str, args: Sequence[str], *, timeout: float, env: Mapping[str, str],
                      cwd: str, max_address_space_bytes: int | None = None, start: str = "auto",
                      sandbox: Any = None) -> ProcessResult:
    """`python -m MODULE ARGS` under the same rules as run_process, forked from the worker fork
    server when fork_server.start_method(start) says so (it has torch and Triton imported already),
    else exec'd, and confined by `sandbox` (an os_sandbox.SandboxPlan; None: not confined). For the
    verifier's run-once workers: HIP source capture, Triton AMD compiles, task loading. `start` is
    the config's `spare_start`."""
    from amdkv.verify import fork_server

    if fork_server.start_method(start) == "fork":
        return fork_server.run_module(module, args, timeout=timeout, env=dict(env), cwd=cwd,
                                      max_address_space_bytes=max_address_space_bytes, sandbox=sandbox)
    return run_process(python_module_argv(module, args, sandbox), timeout=timeout, env=env, cwd=cwd,
                       max_address_space_bytes=max_address_space_bytes)
