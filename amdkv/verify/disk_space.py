"""Free disk space where the verifier writes: checked before each verification and before each
reference computation, and again when a reference fails.

Why: a full disk does not fail cleanly. On the H200 (2026-12-02) KernelBench level-1 references
(outputs of several GB per problem: `23_Softmax` alone is 4096 x 393216 floats) filled the 64 GiB
disk; the reference outputs then came back as torch.save's "unexpected pos" (a short write, blamed on
the task), and the workers that followed died with SIGSEGV while Triton loaded kernels it had just
written truncated. A verification that starts with less than `min_free_disk_gib` free in the cache
or the workers' temp folder is `infra_error` with a message that names the folder and the fix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

GIB = float(1 << 30)


def file_stats(root: str | os.PathLike[str]) -> Iterator[os.stat_result]:
    """The lstat of every file under `root`; a file removed while walking (a concurrent eviction, a
    finished computation) is skipped. One walk for the cache's usage and a candidate folder's size."""
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                yield os.lstat(os.path.join(folder, name))
            except OSError:
                continue


def _existing(path: str | os.PathLike[str]) -> Path:
    """`path` or its nearest existing parent (the cache folder may not exist yet)."""
    p = Path(path).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def low_disk(paths: list[str | os.PathLike[str]], min_free_gib: float) -> str | None:
    """A message naming every folder in `paths` whose file system has less than `min_free_gib`
    GiB free, or None (also None when `min_free_gib` <= 0: the check is off)."""
    if min_free_gib <= 0:
        return None
    short = []
    seen: set[int] = set()
    for path in paths:
        where = _existing(path)
        device = where.stat().st_dev
        if device in seen:
            continue
        seen.add(device)
        free = shutil.disk_usage(where).free / GIB
        if free < min_free_gib:
            short.append(f"{where} has {free:.2f} GiB free")
    if not short:
        return None
    return (f"disk nearly full ({'; '.join(short)}; the verifier needs at least {min_free_gib:g} GiB there): "
            "reference outputs, compiled kernels and worker files would be written short")


def verifier_paths(cache_dir: str | os.PathLike[str]) -> list[str | os.PathLike[str]]:
    """Where a verification writes: the cache (references, compiles, verdicts) and the workers'
    temp folder."""
    return [cache_dir, tempfile.gettempdir()]


LOW_DISK_HINT = ("free space there (`amdkv cache info` shows what the cache holds; the verifier has already removed "
                 "the reference entries nobody was using where the cache shares that disk, so the rest is running "
                 "verifications, the cache's compiled kernels and verdicts, or other files), point AMDKV_CACHE_DIR or "
                 "TMPDIR at a larger disk, or lower AMDKV_MIN_FREE_DISK_GIB (0: no check)")
