"""Candidates start only while the disk they write to has room for them beside the ones already
running: a verification waits for disk instead of failing for it.

Why: a worker writes its outputs (every checked call's, spilled or saved at the end) into its temp
folder, and the parent keeps them mapped while it judges. With 2 jobs, two of KernelBench's largest
problems (tens of GB each) both passed the free-disk check at their start and then filled the GPU
machine's 64-GB disk together (2026-12-06: 17 of 25 problems `infra_error`). The benchmark script
then learned to run those one at a time; this puts the rule where `amdkv eval` and every other
caller get it.

The rule: a candidate is admitted when the free space of its folder's file system, less what the
candidates admitted before it have reserved and less the `min_free_disk_gib` floor, holds its need;
or when no other candidate on that file system is admitted (alone, it runs: it fits, or the free-disk
guard and the short-write handling say so as before). Its need is its references' expected-outputs
files (`candidate_disk_need`): every trial's outputs and their goldens, about what its five checked
calls write without goldens. Reservations are per process (every Verifier of it shares them, the
multi-GPU scheduler's included); separate processes sharing a disk do not see each other's.

The same files bound the largest single file a correct candidate writes (`candidate_file_need`): one
checked call's outputs are at most its case's expected file (which holds a trial's outputs and more),
and what a worker keeps in memory for its outputs file is held under its file-size limit
(`output_spill.budget_under_file_limit`). A candidate whose task needs a larger file than the
configured per-file limit (`sandbox_file_size_gib`, RLIMIT_FSIZE) gets a worker started with that much
(Verifier.run_and_judge): ROCmBench's `rmsnorm_fwd` makes 8.5 GiB per call, and its own kernel was
`infra_error` under the 4-GiB limit on the H100 (2026-12-06). The limit still stops a candidate writing
more than any correct outputs take: such a write is `mismatch`/`outputs_too_large` (judging.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from typing import Any, Callable, Iterator

from amdkv.verify.output_spill import FILE_HEADROOM_BYTES

WAIT_POLL_S = 1.0  # how often a waiting candidate looks at the free space again (others' files shrink too)


def free_bytes(folder: str) -> int:
    return shutil.disk_usage(folder).free


def _expected_file_sizes(refs: dict[str, dict[str, Any]]) -> list[int | None]:
    """The size of each case's expected-outputs file (reference_cache.CaseFiles): every trial's
    outputs and their goldens; None for a file that cannot be read."""
    sizes: list[int | None] = []
    for ref in refs.values():
        try:
            sizes.append(os.stat(ref["files"].expected).st_size)
        except OSError:
            sizes.append(None)
    return sizes


def candidate_disk_need(refs: dict[str, dict[str, Any]]) -> int:
    """Bytes a candidate's run is expected to write and hold until judged: the sum of its cases'
    expected-outputs files."""
    return sum(size or 0 for size in _expected_file_sizes(refs))


def candidate_file_need(refs: dict[str, dict[str, Any]]) -> int | None:
    """The largest single file a correct candidate of these references writes: one call's outputs
    (spilled), at most its case's expected file, plus torch.save's headroom. None when a case's file
    cannot be read: then nothing is known, and the configured limit stands.

    A bound, so a write past a limit at least this large is the candidate's: outputs larger than any
    correct outputs of its task (judging: `mismatch`/`outputs_too_large`, never an `infra_error` a
    reward could treat as "try again"). The outputs file the worker writes at the end holds less than
    its limit by construction (`output_spill.budget_under_file_limit`)."""
    sizes = _expected_file_sizes(refs)
    if not sizes or None in sizes:
        return None
    return max(size for size in sizes if size is not None) + FILE_HEADROOM_BYTES


class DiskAdmission:
    """The reservations of the candidates running in this process, per file system."""

    def __init__(self, free: Callable[[str], int] = free_bytes) -> None:
        self._free = free
        self._cond = threading.Condition()
        self._reserved: dict[int, int] = {}
        self._running: dict[int, int] = {}

    @contextlib.contextmanager
    def admitted(self, folder: str, need_bytes: int, floor_bytes: int,
                 cancelled: Callable[[], bool] = lambda: False) -> Iterator[float]:
        """Inside: the candidate's run and judging. Yields the seconds it waited (0.0 at once)."""
        device = os.stat(folder).st_dev
        t0 = time.monotonic()
        with self._cond:
            while self._running.get(device, 0) and not cancelled() and \
                    self._free(folder) - self._reserved.get(device, 0) - floor_bytes < need_bytes:
                self._cond.wait(WAIT_POLL_S)
            self._reserved[device] = self._reserved.get(device, 0) + need_bytes
            self._running[device] = self._running.get(device, 0) + 1
        try:
            yield time.monotonic() - t0
        finally:
            with self._cond:
                self._reserved[device] -= need_bytes
                self._running[device] -= 1
                self._cond.notify_all()


ADMISSION = DiskAdmission()  # this process's: the disk is shared by every verifier in it
