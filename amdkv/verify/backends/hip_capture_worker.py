"""Worker: import a HIP candidate with `load_inline`/`load` patched, and record their arguments.

    python -m amdkv.verify.backends.hip_capture_worker CANDIDATE.py OUT.json [TASK.py]

Runs in a sandboxed subprocess (the candidate is untrusted). The patches are installed BEFORE the
candidate is imported, so both styles are captured: KernelBench's (`__global__` code in
`cpp_sources`, `CXX=hipcc`) and the `cuda_sources` style. The patched functions return a stub
whose attributes raise `CompileOnlyError`, so `ModelNew(...)` construction proceeds or fails
harmlessly; with a task file, `ModelNew(*get_init_inputs())` is attempted to catch extensions
built in `__init__`. OUT.json is a `HipCaptureReport` (worker_protocol.py), read by backends/hip.py.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

from amdkv.verify.worker_protocol import HipCaptureReport

captures: list[dict[str, Any]] = []


class CompileOnlyError(RuntimeError):
    """Raised when a captured (never built) HIP extension is called."""


class CompileOnlyExtension:
    """Stand-in for the module `load_inline` would return; nothing in it can run."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_amdkv_name", name)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise CompileOnlyError(
            f"compile-only: HIP extension {self._amdkv_name!r} was captured for hipcc but not built, so "
            f"{attr!r} cannot run here (no AMD GPU); the verifier compiles its sources for AMD targets instead")


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else [str(x) for x in v]


def fake_load_inline(name, cpp_sources=None, cuda_sources=None, sycl_sources=None, functions=None,
                     extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None, extra_ldflags=None,
                     extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None,
                     is_python_module=True, with_pytorch_error_handling=True, keep_intermediates=True,
                     use_pch=False, **kwargs):
    captures.append({
        "api": "load_inline", "name": str(name), "cpp_sources": _as_list(cpp_sources),
        "cuda_sources": _as_list(cuda_sources),
        "functions": (_as_list(functions) if not isinstance(functions, dict) else list(functions)),
        "extra_cflags": _as_list(extra_cflags), "extra_cuda_cflags": _as_list(extra_cuda_cflags),
        "extra_include_paths": _as_list(extra_include_paths), "with_cuda": with_cuda,
        "cxx": os.environ.get("CXX"),
    })
    return CompileOnlyExtension(str(name))


def fake_load(name, sources=None, extra_cflags=None, extra_cuda_cflags=None, extra_ldflags=None,
              extra_include_paths=None, build_directory=None, verbose=False, with_cuda=None, **kwargs):
    files = []
    for src in _as_list(sources):
        try:
            files.append({"path": src, "text": Path(src).read_text()})
        except OSError as e:
            files.append({"path": src, "text": None, "error": str(e)})
    captures.append({
        "api": "load", "name": str(name), "sources": files, "extra_cflags": _as_list(extra_cflags),
        "extra_cuda_cflags": _as_list(extra_cuda_cflags), "extra_include_paths": _as_list(extra_include_paths),
        "with_cuda": with_cuda, "cxx": os.environ.get("CXX"),
    })
    return CompileOnlyExtension(str(name))


def install_patches() -> None:
    import torch
    import torch.utils.cpp_extension as ce

    # One intra-op thread: the capture only needs the candidate's import and `__init__`, and a
    # task whose `__init__` does a large CPU op (l2_rope's cos/sin tables) otherwise made libgomp
    # start a thread per core, which failed on a 16-core GPU host under the capture's limits
    # ("libgomp: Thread creation failed: Resource temporarily unavailable", H100, 2026-12-05) and
    # turned a correct reference solution into `compile_error`. Forked from a fork server whose
    # torch is imported already, so OMP_NUM_THREADS in the environment would come too late.
    torch.set_num_threads(1)

    ce.load_inline = fake_load_inline
    ce.load = fake_load


def _import(path: str, prefix: str):
    from amdkv.tasks.loader import import_source_file

    return import_source_file(path, prefix)


def _err(e: BaseException) -> str:
    tb = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(tb[-6:])[-4000:]


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: python -m amdkv.verify.backends.hip_capture_worker CANDIDATE OUT.json [TASK]", file=sys.stderr)
        return 2
    cand, out = argv[0], argv[1]
    install_patches()
    import_error: str | None = None
    init_error: str | None = None
    sys.path.insert(0, str(Path(cand).resolve().parent))
    try:
        mod = _import(cand, "amdkv_hip_candidate")
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        import_error = _err(e)
        mod = None
    if mod is not None and len(argv) == 3 and hasattr(mod, "ModelNew"):
        try:
            task = _import(argv[2], "amdkv_hip_task")
            init = task.get_init_inputs() if hasattr(task, "get_init_inputs") else []
            mod.ModelNew(*init)
        except BaseException as e:  # noqa: BLE001 - harmless: we only want the load_inline calls
            init_error = _err(e)
    report = HipCaptureReport(captures=captures, import_error=import_error, init_error=init_error)
    # what a candidate passed need not be JSON (e.g. with_cuda=<an object>): written as its text
    Path(out).write_text(report.to_json(default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
