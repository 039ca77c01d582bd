"""Worker: import an (untrusted) candidate and compile its captured Triton launches for AMD archs.

    python -m amdkv.verify.amd.triton_compile_worker IN.json OUT.json

IN.json: {"candidate_path": str, "captures": [capture dicts], "archs": ["gfx942", ...]}
OUT.json: {"results": [ArchResources dicts], "seconds": float}

The parent (`compile_triton_for_amd`) runs this through `sandbox.run_process` with a timeout,
without `TRITON_INTERPRET`, and with a private `TRITON_CACHE_DIR`, because importing the candidate
runs its code. Distinct launches (same kernel, signature, specialisation, constexprs, options)
are compiled once per arch.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import sys
import textwrap
import time
import traceback
from pathlib import Path
from typing import Any

from amdkv.source_ast import parse as parse_source
from amdkv.verify.amd.triton_aot import compile_capture_for_arch
from amdkv.verify.amd.triton_capture import capture_key
from amdkv.verify.verdict import ArchResources


def load_candidate(path: str):
    """Import the candidate file as a fresh module (shared helper: amdkv.tasks.loader)."""
    from amdkv.tasks.loader import import_source_file

    return import_source_file(path, "amdkv_candidate")


def _nested_kernel(module, capture: dict):
    """Rebuild a kernel defined inside a function (`<locals>` in its qualname) from the file.

    The `def` (with its decorators) is cut out of the source, dedented, and executed in the
    module's namespace with its original line numbers, so Triton's `inspect` lookups still find
    the source. Kernels that close over local variables of the enclosing function cannot be
    rebuilt this way and fail with a NameError at compile time.
    """
    file = capture.get("file")
    src = Path(file).read_text()
    name = capture["kernel"]
    for node in ast.walk(parse_source(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            lines = src.splitlines(keepends=True)[start - 1:node.end_lineno]
            code = "\n" * (start - 1) + textwrap.dedent("".join(lines))
            ns = dict(vars(module))
            exec(compile(code, file, "exec"), ns)  # noqa: S102 - candidate code, inside the sandboxed worker
            return ns[name]
    raise LookupError(f"kernel {name} not found in {file}")


def find_kernel(module, capture: dict):
    """The kernel object named by the capture's qualname in the freshly imported module."""
    qual = capture.get("qualname") or capture.get("kernel")
    if "<locals>" in qual:
        return _nested_kernel(module, capture)
    obj: Any = module
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def compile_all(candidate_path: str, captures: list[dict], archs: list[str]) -> list[dict]:
    """ArchResources dicts for every distinct capture x arch (failures included, never raised)."""
    results: list[dict] = []
    try:
        module = load_candidate(candidate_path)
    except BaseException as e:  # noqa: BLE001 - an import failure is reported, not raised
        msg = f"importing the candidate failed: {type(e).__name__}: {e}"
        names = sorted({c.get("kernel") or "?" for c in captures}) or ["?"]
        return [dataclasses.asdict(ArchResources(a, n, False, error=msg)) for n in names for a in archs]
    seen: dict[str, int] = {}
    for i, cap in enumerate(captures):
        if "error" in cap and "signature" not in cap:
            for arch in archs:
                results.append(dataclasses.asdict(ArchResources(arch, cap.get("kernel") or "?", False,
                                                                error=f"launch capture failed: {cap['error']}")))
            continue
        key = capture_key(cap)
        if key in seen:
            continue
        seen[key] = i
        modules = {cap.get("module"): module}
        try:
            kernel = find_kernel(module, cap)
        except BaseException as e:  # noqa: BLE001
            for arch in archs:
                results.append(dataclasses.asdict(ArchResources(
                    arch, cap.get("kernel") or "?", False,
                    error=f"cannot find kernel {cap.get('qualname')} in the candidate: {type(e).__name__}: {e}")))
            continue
        for arch in archs:
            res = compile_capture_for_arch(kernel, cap, arch, modules=modules)
            res.config = dict(res.config or {}, capture_index=i)
            results.append(dataclasses.asdict(res))
    return results


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m amdkv.verify.amd.triton_compile_worker IN.json OUT.json", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    job = json.loads(Path(argv[0]).read_text())
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        results = compile_all(job["candidate_path"], job.get("captures", []), job.get("archs", ["gfx942"]))
    except Exception:  # noqa: BLE001 - a bug here is an infrastructure error: say so on stderr
        traceback.print_exc()
        return 3
    Path(argv[1]).write_text(json.dumps({"results": results, "seconds": time.monotonic() - t0}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def compile_triton_for_amd(*args, **kwargs):
    """Parent-side entry (re-exported): see `amdkv.verify.amd.compile.compile_triton_for_amd`."""
    from amdkv.verify.amd.compile import compile_triton_for_amd as impl

    return impl(*args, **kwargs)
