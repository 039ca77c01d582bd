"""Parent side: compile a candidate's captured Triton launches for AMD archs in a sandboxed worker.

`compile_triton_for_amd` never raises for a candidate's fault: import errors, compiler errors,
crashes and timeouts all come back as `ArchResources(compiled=False, error=...)`. Only a
broken harness (the worker itself failing with exit code 3) raises `InfrastructureError`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Sequence

from amdkv.errors import InfrastructureError
from amdkv.verify.amd.triton_capture import capture_key
from amdkv.verify import os_sandbox
from amdkv.verify.sandbox import run_python_module, with_package_on_path
from amdkv.verify.verdict import ArchResources

WORKER_MODULE = "amdkv.verify.amd.triton_compile_worker"


def _distinct_kernels(captures: list[dict]) -> list[str]:
    seen, names = set(), []
    for c in captures:
        key = capture_key(c)
        if key not in seen:
            seen.add(key)
            names.append(c.get("kernel") or "?")
    return names or ["?"]


def compile_triton_for_amd(candidate_path: str | os.PathLike, captures: list[dict],
                           archs: Sequence[str] = ("gfx942",), timeout: float = 120,
                           host_memory_bytes: int | None = 16 << 30, start: str = "auto",
                           sandbox: str = "auto") -> list[ArchResources]:
    """One `ArchResources` per distinct captured launch x arch (`sandbox`: the OS sandbox mode)."""
    archs = list(archs)
    if not captures:
        return []
    with tempfile.TemporaryDirectory(prefix="amdkv-tamd-") as tmp:
        job, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        job.write_text(json.dumps({"candidate_path": str(Path(candidate_path).resolve()),
                                   "captures": captures, "archs": archs}, default=str))
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton-cache")  # private: the candidate runs here
        env = with_package_on_path(env)
        plan = os_sandbox.plan(sandbox, writable=[tmp], readable=[str(Path(candidate_path).resolve())])
        res = run_python_module(WORKER_MODULE, [str(job), str(out)], timeout=timeout, env=env,
                                cwd=tmp, host_memory_bytes=host_memory_bytes, start=start, sandbox=plan)
        if res.timed_out:
            why = f"AMD compile timed out after {timeout:.0f} s"
        elif res.returncode == 3:
            raise InfrastructureError(f"the Triton AMD compile worker failed:\n{res.stderr[-3000:]}",
                                      hint="this is a bug in amdkv.verify.amd; please report it with the candidate")
        elif res.returncode == 0 and out.is_file():
            return [ArchResources(**r) for r in json.loads(out.read_text())["results"]]
        else:
            why = (f"compile worker died ({res.signal_name or f'rc {res.returncode}'}): "
                   f"{res.stderr.strip()[-2000:] or 'no output'}")
    return [ArchResources(a, name, False, error=why) for name in _distinct_kernels(captures) for a in archs]
