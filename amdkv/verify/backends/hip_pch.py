"""The precompiled header of the split scheme's host units: `<torch/extension.h>` and the HIP prelude,
precompiled once per host compiler, flags, torch version, compat headers and CUDA release.

Why: parsing torch's full header is most of a host unit's compile; the precompiled form halves a
binding unit's build. It has its own cache entry and a file lock, so that concurrent builders
(threads or processes) wait for one build of it instead of each building it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from amdkv.verify.backends.hip_toolchain import (BuildToolchain, build_cache_dir, compat_headers_hash, host_compiler,
                                                 torch_paths)
from amdkv.verify.backends.hip_units import HOST_PRELUDE
from amdkv.verify.file_lock import exclusive_file_lock
from amdkv.verify.sandbox import run_process

# Version of every cache key, the PCH's and the builds' (hip_build.build_key): bump it to orphan old entries.
BUILD_VERSION = 2  # 2: split scheme (unit kinds, host compiler in the key)
PCH_HEADER = "amdkv_host_prelude.h"


def _pch_key(tc: BuildToolchain, flags: list[str]) -> str:
    blob = json.dumps([BUILD_VERSION, host_compiler(), flags, HOST_PRELUDE, torch_paths()["version"],
                       compat_headers_hash(), tc.version])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def host_pch(tc: BuildToolchain, extra_flags: Iterable[str] = (), *, cache_dir: Path | None = None,
             timeout: float = 600.0) -> Path | None:
    """The header to force-include in host units (HOST_PRELUDE) with its GCC precompiled form next to it,
    built once per (host compiler, flags, torch version, compat headers, CUDA) under
    `<cache>/pch/<key>/` (~0.8 GB; building it takes ~35 s, a binding unit with it ~12 s instead of
    ~23 s, 2-core machine). None when it cannot be built: units then parse the headers (slower,
    same result). A failure is remembered (`failed.txt`) so it is not retried by every build."""
    flags = [*tc.host_flags(), *extra_flags]
    key = _pch_key(tc, flags)
    parent = (cache_dir or build_cache_dir()) / "pch"
    final = parent / key

    def ready() -> Path | None:
        return final / PCH_HEADER if (final / (PCH_HEADER + ".gch")).is_file() else None

    if ready() or (final / "failed.txt").is_file():
        return ready()
    parent.mkdir(parents=True, exist_ok=True)
    with exclusive_file_lock(parent / f"{key}.lock"):
        if ready() or (final / "failed.txt").is_file():
            return ready()
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=parent))
        try:
            (tmp / PCH_HEADER).write_text(HOST_PRELUDE)
            r = run_process([host_compiler()[0], "-x", "c++-header", str(tmp / PCH_HEADER), "-o",
                             str(tmp / (PCH_HEADER + ".gch")), *flags], timeout=timeout, cwd=str(tmp))
            if r.timed_out:
                return None  # maybe the machine's fault: not remembered
            if r.returncode != 0:
                (tmp / f"{PCH_HEADER}.gch").unlink(missing_ok=True)
                (tmp / "failed.txt").write_text(r.stderr or r.stdout)
            with contextlib.suppress(OSError):  # a concurrent builder's rename (another host) may win
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return ready()
