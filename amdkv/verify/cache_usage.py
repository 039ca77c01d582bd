"""What the verifier's cache folder holds, and pruning its reference entries safely while verifiers run.

Why: the reference cache (`refs/`) is the verifier's largest store (inputs and float64 goldens of every
trial: tens of GB for KernelBench's level 1), and the low-disk error used to tell users to delete it by
hand. Deleting by hand removes entries a running verification is reading, which turns its next read
into an infrastructure error. `prune_references` goes through the same eviction as the verifier's own
size cap, which never removes an entry a verification in any process holds (`reference_cache.Leases`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from amdkv.verify.reference_cache import evict, folder_usage, reference_entries, refs_root
from amdkv.verify.triton_launchers import LAUNCHERS_DIR

# The cache folder's parts (config.cache_dir), with what each holds and what deleting it costs.
CACHE_PARTS: dict[str, str] = {
    "refs": "reference inputs, outputs and goldens per (task, case, seeds, device): recomputed when missing",
    "verdicts": "verdicts of identical earlier verifications: verified again when missing",
    "hipbuild": "HIP candidates' builds and the host precompiled header: rebuilt when missing",
    "compile-cache": "the references' torch.compile and Triton caches: recompiled when missing",
    "triton-stubs": "Triton's driver helper built once for every worker: rebuilt when missing",
    LAUNCHERS_DIR: "Triton's kernel launchers built once per signature (AMDKV_SHARE_TRITON_LAUNCHERS): rebuilt "
                   "when missing",
    # in the default cache folder (~/.cache/amdkv) beside the verifier's own parts
    "external": "external benchmarks' tasks as loaded (tasks/external): loaded again when missing",
    "procedural": "procedural tasks written out (tasks/procedural): written again when missing",
    "hipcache": "compile-only HIP results for AMD targets (AMDKV_HIP_CACHE_DIR): compiled again when missing",
    "toolchains": "the installed hipcc toolchain (`amdkv toolchain install`): installed again when missing",
}


@dataclasses.dataclass(frozen=True)
class PartUsage:
    name: str
    bytes: int
    files: int
    about: str


@dataclasses.dataclass(frozen=True)
class CacheUsage:
    cache_dir: str
    parts: list[PartUsage]
    reference_entries: int
    free_bytes: int | None  # on the cache folder's file system; None when the folder does not exist

    @property
    def total_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def to_dict(self) -> dict[str, object]:
        return {"cache_dir": self.cache_dir, "total_bytes": self.total_bytes, "free_bytes": self.free_bytes,
                "reference_entries": self.reference_entries,
                "parts": [dataclasses.asdict(p) for p in self.parts]}


def cache_usage(cache_dir: str | os.PathLike[str]) -> CacheUsage:
    """Sizes of the cache's parts (any other folder in it is listed as `other: NAME`)."""
    root = Path(cache_dir)
    parts = []
    if root.is_dir():
        names = sorted(CACHE_PARTS) + sorted(p.name for p in root.iterdir() if p.name not in CACHE_PARTS)
        for name in names:
            path = root / name
            if not path.exists():
                continue
            size, files = folder_usage(path) if path.is_dir() else (path.stat().st_size, 1)
            parts.append(PartUsage(name=name, bytes=size, files=files,
                                   about=CACHE_PARTS.get(name, "not a part amdkv knows")))
    free = shutil.disk_usage(root).free if root.is_dir() else None
    return CacheUsage(cache_dir=str(root), parts=parts, reference_entries=count_reference_entries(root),
                      free_bytes=free)


def count_reference_entries(cache_dir: str | os.PathLike[str]) -> int:
    return sum(1 for _ in reference_entries(refs_root(cache_dir)))


def prune_references(cache_dir: str | os.PathLike[str], keep_gib: float) -> tuple[list[tuple[str, int]], int]:
    """Remove least recently used reference entries until `refs/` holds at most `keep_gib` GiB (0:
    every entry nobody holds), never one a verification in any process holds. Returns ([(entry key,
    bytes)] removed, bytes left)."""
    if keep_gib < 0:
        raise ValueError(f"keep_gib must be 0 or more, not {keep_gib}")
    # rewalk_s=0: a walk now, not the estimate a verifier's eviction may use between its walks
    return evict(cache_dir, int(keep_gib * 2**30), rewalk_s=0.0)
