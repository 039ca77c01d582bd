"""Triton's CUDA driver helper (`cuda_utils`), built once by the trusted parent and copied into
every spare's private Triton cache.

Why: every worker has its own empty `TRITON_CACHE_DIR` (a candidate must not reach another's
compiled kernels), so every spare compiled Triton's C driver helper with gcc at start-up: 0.40 of
the 0.6 host CPU-seconds a spare's start-up cost on the H200 (docs/gpu.md, Speed). The helper's
source is Triton's own, not the candidate's, and its cache key is a hash of that source and the
platform, so a copy built by the parent is the file the worker would have built. Each spare gets
its own copy (never a link): a candidate that overwrote its copy changes nothing for the next.

On by default (`AMDKV_SEED_TRITON_STUBS`, config.py). It was off from 2026-12-02 to 2026-12-05: on the
H200, TritonBench-G reference workers given the seeded helper died with SIGSEGV (inside Triton's
`_init_handles`, or while garbage-collecting) in 4-8 of ~15 workers per 30-s run with every other
setting varied, and in none of 24 with seeding off (benchmarks/crash_probe.py; docs/gpu.md, Known
gaps). After the fix below, the same probe with seeding on crashed 0 of 16 workers (H100,
2026-12-05), and the throughput run's 231 seeded candidate workers were all `ok`.

The mechanism, found in session 13 by reading the code: reference
workers do not have a private Triton cache. They share one (`compile-cache/triton`, set through the
spare's `extra_env`, references.py), and the spare seeded into whatever `TRITON_CACHE_DIR` it had,
with `shutil.copyfile`, which truncates and rewrites the file in place. Every new reference worker
so rewrote the `cuda_utils` library that the running ones had loaded, and a process executing code
from a mapped file that is truncated under it dies (SIGBUS/SIGSEGV), in that library's code: its
`load_binary` (`_init_handles`) and its tensor-map type's deallocator (garbage collection), the two
crash sites, spread over the whole run, fork and exec alike, sandbox or not. Candidate workers
(private caches) never crashed. Now: a spare seeds only its own cache (pool.py), a file already there
is never rewritten, and every copy is renamed into place (a new inode: a process that mapped the old
file keeps it). Test: `tests/test_triton_stubs.py` shows on this machine that an in-place copy changes
what a running process mapped and that these copies do not.
Also fixed in session 12: spares started from several threads at once each built the helper and
wrote the same temporary file; now one thread builds, the others wait.

The build uses Triton's private `triton.runtime.build._build` and `triton.runtime.cache._base32`; any failure (no libcuda on this
machine, another Triton version) returns None and spares build the helper themselves, as before:
this changes speed, never verdicts.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sysconfig
import tempfile
import threading
from pathlib import Path

_BUILD_LOCK = threading.Lock()  # spares start from many threads: one builds, the rest wait for its file


@functools.lru_cache(maxsize=4)
def cuda_driver_stub(cache_root: str) -> tuple[str, str] | None:
    """(cache folder name, path of the built .so) under `cache_root`, built on first use; None where
    it cannot be built here."""
    with _BUILD_LOCK:
        return _build_stub(cache_root)


def _build_stub(cache_root: str) -> tuple[str, str] | None:
    try:
        from triton.backends.nvidia import driver as nv

        return build_cached_module("cuda_utils", Path(nv.dirname, "driver.c").read_text(), cache_root)
    except Exception:  # noqa: BLE001 - speed only: without the stub a spare compiles its own
        return None


def build_cached_module(name: str, src: str, cache_root: str) -> tuple[str, str]:
    """Build Triton's C module `name` from `src` (Triton's own source, never a candidate's) the way
    `triton.runtime.build.compile_module_from_src` does, into `<cache_root>/<key>/<name><suffix>`:
    the folder name Triton's FileCacheManager uses for that source's key, so a copy of the folder in a
    worker's cache is found there. Returns (key, path); raises where it cannot be built here."""
    from triton.backends.nvidia import driver as nv
    from triton.runtime.build import _build, platform_key
    from triton.runtime.cache import _base32

    key = _base32(hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest())
    dest = Path(cache_root, key, name + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    if not dest.is_file():
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="amdkv-stub-") as tmp:
            c_file = Path(tmp, f"{name}.c")
            c_file.write_text(src)
            so = _build(name, str(c_file), tmp, nv.library_dirs(), list(nv.include_dirs), list(nv.libraries), [])
            _copy_atomically(so, dest)  # another process's reader sees all or nothing
    return key, str(dest)


def seed_spare_cache(triton_cache_dir: str, cache_root: str) -> bool:
    """Copy the prebuilt helper into one spare's Triton cache where Triton looks for it
    (`<TRITON_CACHE_DIR>/<key>/cuda_utils<suffix>`). False when there is no stub to copy."""
    stub = cuda_driver_stub(cache_root)
    if stub is None:
        return False
    key, so = stub
    seed_file(so, triton_cache_dir, key)
    return True


def seed_file(so: str | Path, triton_cache_dir: str, key: str) -> bool:
    """Copy a built module into `<triton_cache_dir>/<key>/` under its own name, where that worker's
    Triton looks for it; False when a file is there already, which is never rewritten (a library
    another process may have loaded: module docstring)."""
    dest = Path(triton_cache_dir, key, Path(so).name)
    if dest.exists():
        return False
    dest.parent.mkdir(parents=True, exist_ok=True)
    _copy_atomically(so, dest)
    return True


def _copy_atomically(src: str | Path, dest: Path) -> None:
    """Copy to a temporary name of this process and thread, then rename: no reader, and no other
    writer, ever sees a partly written shared library."""
    part = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}")
    shutil.copyfile(src, part)
    os.replace(part, dest)
