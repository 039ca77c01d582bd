"""What every child process of the verifier shares, however it was started (exec'd by
sandbox.run_process or forked from fork_server.run_module): its result, and the PYTHONPATH that
makes it import this same amdkv.

A leaf module (stdlib only) so that sandbox.py, fork_server.py and os_sandbox.py can all import it:
when these lived in sandbox.py, sandbox -> fork_server -> sandbox and os_sandbox -> sandbox ->
fork_server -> os_sandbox were import cycles (benchmarks/import_graph.py --lazy).
"""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Mapping


@dataclasses.dataclass
class ProcessResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float

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
