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

import amdkv
from amdkv.verify.worker_protocol import ReferenceCaseReport


# The layout of a cached case's report.json (worker_protocol.ReferenceCaseReport, read strictly):
# 2 since the protocol was typed (every field written; the compile baseline's failure in
# `compile_error`); 3: `gpu_need_bytes`; 4: same layout, but a float64 golden that ran out of memory
# beside other references is no longer dropped (worker_jobs: the gate re-runs it alone), so entries
# written before, which may lack a golden for that reason, are recomputed. Part of the key, so an
# entry of another layout is never read, only recomputed.
REPORT_FORMAT = 4


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

    def complete(self) -> bool:
        return self.inputs.is_file() and self.expected.is_file() and self.report.is_file()

    def read_report(self) -> ReferenceCaseReport:
        return ReferenceCaseReport.from_json(self.report.read_text(), where=str(self.report))

    def write_report(self, report: ReferenceCaseReport) -> None:
        tmp = self.report.with_suffix(".tmp")
        tmp.write_text(report.to_json())
        os.replace(tmp, self.report)


# An entry used (read or written) this recently is never evicted: another verification, in this
# process or another sharing the cache, may be about to read it. The verifier passes twice its
# candidate timeout plus a minute (references.ReferencesMixin._evict_references).
EVICT_MIN_AGE_S = 600.0


def touch(files: CaseFiles) -> None:
    """Mark a cached case as used now: its report's mtime is the eviction clock (least recently used
    goes first). Best effort: a read-only cache is still a cache."""
    with contextlib.suppress(OSError):
        os.utime(files.report)


def _entry_size(entry: Path) -> int:
    total = 0
    for path in entry.rglob("*"):
        # a file removed under us (a concurrent eviction, a finished computation) counts nothing
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_size
    return total


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


def evict(cache_dir: str | os.PathLike[str], cap_bytes: int, *, min_age_s: float = EVICT_MIN_AGE_S,
          now: float | None = None, rewalk_s: float = EVICT_REWALK_S) -> tuple[list[tuple[str, int]], int]:
    """Remove least recently used reference entries until the cache holds at most `cap_bytes`,
    never one used in the last `min_age_s` seconds. Returns ([(entry key, bytes)] removed, bytes
    left, or its estimate when no walk was needed). Each entry is renamed away before it is deleted,
    so a reader sees it whole or not at all.

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
    removed, total = _walk_and_evict(root, cap_bytes, min_age_s, now)
    _LAST_WALK[str(root)] = _Walk(at=now, total=total, free=shutil.disk_usage(root).free)
    return removed, total


def _walk_and_evict(root: Path, cap_bytes: int, min_age_s: float, now: float) -> tuple[list[tuple[str, int]], int]:
    entries: list[tuple[float, int, Path]] = []
    for shard in root.iterdir():
        if not shard.is_dir():
            continue
        for entry in shard.iterdir():
            if not entry.is_dir() or entry.name.startswith("."):
                continue
            try:
                report = entry / "report.json"
                used = report.stat().st_mtime if report.is_file() else entry.stat().st_mtime
            except OSError:
                continue
            entries.append((used, _entry_size(entry), entry))
    total = sum(size for _, size, _ in entries)
    removed: list[tuple[str, int]] = []
    for used, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= cap_bytes or now - used < min_age_s:
            break  # oldest first: every later entry is younger still
        trash = entry.with_name(f".evicted-{entry.name}-{os.getpid()}")
        try:
            os.rename(entry, trash)
        except OSError:  # another process evicted or is rewriting it
            continue
        shutil.rmtree(trash, ignore_errors=True)
        total -= size
        removed.append((entry.name, size))
    return removed, total
