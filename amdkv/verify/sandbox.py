"""The verifier's runner of child Python processes: `python -m MODULE` forked from the fork server
or exec'd, confined by the OS sandbox when asked.

The process primitives (`run_process`: own process group, wall-clock timeout, memory cap;
`ProcessResult`, `kill_group`, `memory_cap_preexec`, `package_root`, `with_package_on_path`) live in
`amdkv/process.py`, below the verifier and the HIP toolchain, which both use them; they are
re-exported here because the verifier's modules, its tests and its users import them from here.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

# Re-exported (see above); amdkv.process imports nothing from amdkv.verify, so this makes no cycle.
from amdkv.process import (ProcessResult, kill_group, memory_cap_preexec, package_root,  # noqa: F401
                           run_process, with_package_on_path)


def python_module_argv(module: str, args: Sequence[str] = (), sandbox: Any = None) -> list[str]:
    """The command line of `python -m MODULE ARGS`, confined by `sandbox` (an os_sandbox.SandboxPlan)
    when given: then the launcher `python -m amdkv.verify.os_sandbox run PLAN MODULE ARGS` enters
    the sandbox while it is single-threaded and runs the module in the same interpreter."""
    import sys

    if sandbox is None:
        return [sys.executable, "-m", module, *args]
    return [sys.executable, "-m", "amdkv.verify.os_sandbox", "run", sandbox.to_json(), module, *args]


def run_python_module(module: str, args: Sequence[str], *, timeout: float, env: Mapping[str, str],
                      cwd: str, host_memory_bytes: int | None = None, start: str = "auto",
                      sandbox: Any = None) -> ProcessResult:
    """`python -m MODULE ARGS` under the same rules as run_process, forked from the worker fork
    server when fork_server.start_method(start) says so (it has torch and Triton imported already),
    else exec'd, and confined by `sandbox` (an os_sandbox.SandboxPlan; None: not confined). For the
    verifier's run-once workers: HIP source capture, Triton AMD compiles, task loading. `start` is
    the config's `spare_start`."""
    from amdkv.verify import fork_server

    if fork_server.start_method(start) == "fork":
        return fork_server.run_module(module, args, timeout=timeout, env=dict(env), cwd=cwd,
                                      host_memory_bytes=host_memory_bytes, sandbox=sandbox)
    return run_process(python_module_argv(module, args, sandbox), timeout=timeout, env=env, cwd=cwd,
                       host_memory_bytes=host_memory_bytes)
