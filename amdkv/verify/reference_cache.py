"""Where reference inputs/outputs live, keyed by everything that could change them.

Key = (task source hash, case, seeds, init seed, device kind and name, torch/triton/amdkv
versions, whether baselines were timed). Inputs and expected outputs are separate files so a
candidate can be given the first without being able to open the second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import amdkv
from amdkv.verify.disk_space import file_stats
from amdkv.verify.file_lock import removable_if_unleased, take_shared_lease
from amdkv.verify.worker_protocol import ReferenceCaseReport


# The layout of a cached case's report.json (worker_protocol.ReferenceCaseReport, read strictly):
# 2 since the protocol was typed (every field written; the compile baseline's failure in
# `compile_error`); 3: `gpu_need_bytes`; 4: same layout, but a float64 golden that ran out of memory
# beside other references is no longer dropped (worker_jobs: the gate re-runs it alone), so entries
# written before, which may lack a golden for that reason, are recomputed. Part of the key, so an
# entry of another layout is never read, only recomputed.
REPORT_FORMAT = 6  # 5: ReferenceCaseReport.output_bytes; 6: its phase_s (both session 23)


def refs_root(cache_dir: str | os.PathLike[str]) -> Path:
    """Reference files live under the config's cache dir (`VerifierConfig.cache_dir`)."""
    return Path(cache_dir) / "refs"


def case_key(task_hash: str, case_name: str, seeds: list[int], init_seed: int, device_desc: str,
             timed: bool, golden: bool) -> str:
    import torch
    import triton

    blob = json.dumps({"task": task_hash, "case": case_name, "seeds": seeds, "init_seed": init_seed,
                       "device": device_desc, "torch": torch.__version__, "triton": triton.__version__,
                       "amdkv": amdkv.__version__, "timed": timed, "golden": golden,
                       "format": REPORT_FORMAT}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class CaseFiles:
    """The three files of one cached reference case: inputs, expected outputs, report."""

    def __init__(self, key: str, cache_dir: str | os.PathLike[str]) -> None:
        base = refs_root(cache_dir) / key[:2] / key
        self.dir = base
        self.inputs = base / "inputs.pt"
        self.expected = base / "expected.pt"
        self.report = base / "report.json"
        self.lease = lease_path(base)

    def complete(self) -> bool:
        return self.inputs.is_file() and self.expected.is_file() and self.report.is_file()

    def read_report(self) -> ReferenceCaseReport:
        return ReferenceCaseReport.from_json(self.report.read_text(), where=str(self.report))

    def write_report(self, report: ReferenceCaseReport) -> None:
        tmp = self.report.with_suffix(".tmp")
        tmp.write_text(report.to_json())
        os.replace(tmp, self.report)


def lease_path(entry: Path) -> Path:
    """An entry's lease file: beside the entry, not in it, so it outlives the entry's eviction (a reader
    waiting on it then finds the entry gone and recomputes it) and is never counted in its size."""
    return entry.with_name(f"{entry.name}.lease")


class Leases:
    """The cache entries one verification uses, each held under a shared lease (file_lock) from before
    its lookup until the candidate is judged. Eviction takes a lease only when nobody holds it, so an
    entry in use by any process sharing the cache is never removed, however fast the run.

    Why: before, an entry used within twice the candidate timeout plus a minute was kept instead. A
    KernelBench level-1 shard verifies 25 problems in about four minutes, all inside that window, so
    its 16-GiB cap removed nothing and the GPU machine's 64-GiB disk filled (2026-12-06: 17 of 25
    problems infra_error). A verifier that dies holds nothing (the kernel drops its locks)."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def take(self, files: CaseFiles) -> None:
        """Hold `files`' entry for this verification. Waits only while an evictor is renaming the entry
        away (the caller then finds it incomplete and computes it again)."""
        files.lease.parent.mkdir(parents=True, exist_ok=True)
        fd = take_shared_lease(files.lease)
        if fd is not None:
            self._fds.append(fd)

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the last descriptor of the open file releases its lock


def touch(files: CaseFiles) -> None:
    """Mark a cached case as used now: its report's mtime is the eviction clock (least recently used
    goes first). Best effort: a read-only cache is still a cache."""
    with contextlib.suppress(OSError):
        os.utime(files.report)


def folder_usage(folder: Path) -> tuple[int, int]:
    """(bytes, files) under `folder`. A file removed while walking (a concurrent eviction, a finished
    computation) counts nothing."""
    total = files = 0
    for st in file_stats(folder):
        total += st.st_size
        files += 1
    return total, files


def reference_entries(root: Path) -> Iterator[Path]:
    """The entry folders of `refs/` (`root`), without the ones being evicted (`.evicted-*`)."""
    if not root.is_dir():
        return
    for shard in root.iterdir():
        if shard.is_dir():
            yield from (e for e in shard.iterdir() if e.is_dir() and not e.name.startswith("."))


# A full walk of refs/ costs ~0.25 ms per entry here (1.2-1.3 s for 5,000 entries on the 2-core dev
# machine) and ran before every new reference: an RL run over thousands of procedural tasks spent
# seconds per task walking. Within this many seconds of the last walk, and while the walk's total plus
# the disk space used since stays under the cap, no walk is needed.
EVICT_REWALK_S = 60.0


@dataclasses.dataclass(frozen=True)
class _Walk:
    at: float    # time.time() of the walk
    total: int   # bytes in refs/ after its evictions
    free: int    # free bytes on refs/'s file system then


_LAST_WALK: dict[str, _Walk] = {}  # by refs/ path; one get or set at a time is atomic in CPython


def evict(cache_dir: str | os.PathLike[str], cap_bytes: int, *, now: float | None = None,
          rewalk_s: float = EVICT_REWALK_S) -> tuple[list[tuple[str, int]], int]:
    """Remove least recently used reference entries until the cache holds at most `cap_bytes`,
    never one a verification holds (`Leases`). Returns ([(entry key, bytes)] removed, bytes
    left, or its estimate when no walk was needed). Each entry is renamed away under its lease held
    exclusively, so a reader sees it whole or not at all.

    Why: reference outputs are the verifier's biggest files (inputs and float64 goldens of every
    trial): KernelBench level 1 totals hundreds of GB, more than a GPU machine's disk, and a long RL
    or generation run over thousands of procedural tasks only ever adds entries. A recomputed entry
    is the same (the key holds everything its values depend on), so evicting costs time, never a
    verdict.

    The walk is skipped within `rewalk_s` of this process's last one while that walk's total plus
    the disk space used since (a drop in the file system's free space: anything written counts, so
    the estimate errs high) is at most the cap. Space freed elsewhere at the same time can hide new
    entries from the estimate, so the cap can be exceeded by what is written in `rewalk_s`; the
    free-disk guard (disk_space.py) still refuses work on a nearly full disk."""
    import time

    root = refs_root(cache_dir)
    if not root.is_dir():
        return [], 0
    now = time.time() if now is None else now
    last = _LAST_WALK.get(str(root))
    if last is not None and 0 <= now - last.at < rewalk_s:
        estimate = last.total + max(0, last.free - shutil.disk_usage(root).free)
        if estimate <= cap_bytes:
            return [], estimate
    removed, total = _walk_and_evict(root, cap_bytes)
    _LAST_WALK[str(root)] = _Walk(at=now, total=total, free=shutil.disk_usage(root).free)
    return removed, total


def make_room(cache_dir: str | os.PathLike[str], short_bytes: int) -> list[tuple[str, int]]:
    """Remove least recently used reference entries nobody holds (`Leases`) until `short_bytes` are
    freed, or none is left to remove. Returns [(entry key, bytes)] removed.

    Why: disk admission (disk_admission.py) waits for the space running verifications will give back,
    but the cache's finished entries give nothing back by themselves: they stay (under the cap, where one
    is set: `evict` before each new reference). On the H100 (2026-12-06) KernelBench's `38_L1Norm_` ran
    alone with 15 GiB of earlier problems' references still cached (under external_gpu's 16-GiB cap),
    needed 56 GiB (32 for its reference, 24 for its candidate's outputs) on a 64-GiB disk, and met a
    full disk (`infra_error`). An evicted entry is recomputed to the same values when next
    needed: making room costs time, never a verdict."""
    root = refs_root(cache_dir)
    if short_bytes <= 0 or not root.is_dir():
        return []
    entries = _entries_by_use(root)
    return _evict_oldest(entries, sum(size for _, size, _ in entries) - short_bytes)[0]


def _walk_and_evict(root: Path, cap_bytes: int) -> tuple[list[tuple[str, int]], int]:
    return _evict_oldest(_entries_by_use(root), cap_bytes)


def _entries_by_use(root: Path) -> list[tuple[float, int, Path]]:
    """(last used, bytes, folder) of every entry under `root`."""
    entries: list[tuple[float, int, Path]] = []
    for entry in reference_entries(root):
        try:
            report = entry / "report.json"
            used = report.stat().st_mtime if report.is_file() else entry.stat().st_mtime
        except OSError:
            continue
        entries.append((used, folder_usage(entry)[0], entry))
    return entries


def _evict_oldest(entries: list[tuple[float, int, Path]], cap_bytes: int) -> tuple[list[tuple[str, int]], int]:
    """Remove the least recently used of `entries` nobody holds until at most `cap_bytes` of theirs are
    left: ([(entry key, bytes)] removed, bytes left)."""
    total = sum(size for _, size, _ in entries)
    removed: list[tuple[str, int]] = []
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= cap_bytes:
            break
        trash = entry.with_name(f".evicted-{entry.name}-{os.getpid()}")
        with removable_if_unleased(lease_path(entry)) as free:
            if not free:  # in use (read, judged or being computed) by a verification
                continue
            try:
                os.rename(entry, trash)
            except OSError:  # another process evicted it meanwhile
                continue
        shutil.rmtree(trash, ignore_errors=True)  # after the lease: readers need not wait for the deletion
        total -= size
        removed.append((entry.name, size))
    return removed, total
