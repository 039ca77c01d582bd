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
guard and the short-write handling say so as before). Before either, where even every running
candidate's reservation given back would not make room, the reference cache's entries nobody uses are
removed, least recently used first, for the rest (`reclaim`, since session 24: a cap, where one is set,
is kept only before a reference is added, and a KernelBench problem that needed 56 of the H100's 64 GiB met
a full disk beside 15 GiB of earlier problems' references, under the script's 16-GiB cap). Its need is its references' expected-outputs
files (`candidate_disk_need`): every trial's outputs and their goldens, about what its five checked
calls write without goldens; or, where more, those calls' outputs counted from the reference's
`output_bytes` (since session 23: at one trial the expected file can be the smaller). Reservations are the machine's, per user: every amdkv process keeps them
in one ledger folder (`AMDKV_DISK_LEDGER_DIR`, default in /dev/shm), a file per admitted candidate,
flock'ed by its holder, so several `amdkv eval`s, `amdkv serve`, and Ray's process per GPU see each
other's (until session 22 they were per process). A killed holder's lock goes with it, and its file is
removed when next seen: a crash never leaves disk reserved.

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
import fcntl
import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from amdkv.verify.disk_space import file_stats
from amdkv.verify.output_spill import FILE_HEADROOM_BYTES

WAIT_POLL_S = 1.0  # how often a waiting candidate looks at the free space again (others' files shrink too)


def free_bytes(folder: str) -> int:
    return shutil.disk_usage(folder).free


def expected_file_sizes(refs: dict[str, dict[str, Any]]) -> list[int | None]:
    """The size of each case's expected-outputs file (reference_cache.CaseFiles): every trial's
    outputs and their goldens; None for a file that cannot be read. Read once per verification:
    both needs below are derived from it."""
    sizes: list[int | None] = []
    for ref in refs.values():
        try:
            sizes.append(os.stat(ref["files"].expected).st_size)
        except OSError:
            sizes.append(None)
    return sizes


def candidate_disk_need(sizes: list[int | None], calls_bytes: int = 0) -> int:
    """Bytes a candidate's run is expected to write and hold until judged: the sum of its cases'
    expected-outputs files (`expected_file_sizes`), or what its checked calls write (`calls_bytes`:
    each case's calls times one trial's outputs, `checked_calls_bytes`), whichever is more. The
    expected files alone fall short at one trial where goldens are not larger than the outputs (float64
    or integer outputs, a task without goldens): 2 or 1 call's worth against 3 written."""
    return max(sum(size or 0 for size in sizes), calls_bytes)


def checked_calls_bytes(refs: dict[str, dict[str, Any]], timed_calls: bool) -> int:
    """What a correct candidate's checked calls write over these references' cases: per case, its
    trials, the re-check, and the call after timing where the candidate is timed (`timed_calls`: a GPU
    run of a timed case), each one trial's outputs (the reference report's `output_bytes`)."""
    total = 0
    for ref in refs.values():
        report = ref.get("report")
        calls = len(ref["seeds"]) + 1 + (1 if timed_calls and ref.get("timed") else 0)
        total += calls * (getattr(report, "output_bytes", 0) or 0)
    return total


def handed_copy_bytes(paths: list[str], folder: str) -> int:
    """Bytes the worker's `in/` folder takes for files handed to it (pool.Spare.hand): a hard link costs
    nothing, but a file on another file system than `folder` is copied, and that copy is the candidate's
    to reserve (the references' cache on /dev/shm, the workers' folders on disk: each candidate copies
    its inputs, up to 8 GiB for KernelBench's largest)."""
    try:
        here = os.stat(folder).st_dev
    except OSError:
        return 0
    total = 0
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_dev != here:
            total += st.st_size
    return total


# A candidate's folder may hold this much beyond its reservation before the verdict says so: its
# compilers' caches (Triton, CUDA, torch extensions) are not reserved and take megabytes
OVER_RESERVATION_SLACK_BYTES = 256 * 2**20
CHECK_WRITTEN_ABOVE_BYTES = 256 * 2**20  # smaller needs are not worth a walk of the folder


def folder_bytes(root: str) -> int:
    """Disk blocks the files under `root` take, each counted once: a file with other hard links (an
    inputs file handed from the references' cache) is not this folder's space."""
    return sum(st.st_blocks * 512 for st in file_stats(root) if st.st_nlink == 1)


def over_reservation(root: str, need_bytes: int) -> int:
    """Bytes a candidate's folder holds beyond its reservation and the slack (0: within it, or a need too
    small to check). Why: admission is only as right as the writers' estimates, and a write that passed
    its reservation beside others is a short write somewhere else (session 23's `33_BatchNorm` on the H100
    failed so with no record of who wrote what); the verdict says it, so the next such failure has a name."""
    return past_reservation(lambda: folder_bytes(root), need_bytes)


def past_reservation(written: Callable[[], int], need_bytes: int) -> int:
    """Bytes `written()` (asked only for a need worth checking) exceeds `need_bytes` and the slack by; 0
    when within. The one rule for candidates' folders and references' files."""
    if need_bytes < CHECK_WRITTEN_ABOVE_BYTES:
        return 0
    return max(0, written() - need_bytes - OVER_RESERVATION_SLACK_BYTES)


def candidate_file_need(sizes: list[int | None]) -> int | None:
    """The largest single file a correct candidate of these references writes: one call's outputs
    (spilled), at most its case's expected file, plus torch.save's headroom. None when a case's file
    cannot be read: then nothing is known, and the configured limit stands.

    A bound, so a write past a limit at least this large is the candidate's: outputs larger than any
    correct outputs of its task (judging: `mismatch`/`outputs_too_large`, never an `infra_error` a
    reward could treat as "try again"). The outputs file the worker writes at the end holds less than
    its limit by construction (`output_spill.budget_under_file_limit`). `sizes`: expected_file_sizes."""
    if not sizes or None in sizes:
        return None
    return max(size for size in sizes if size is not None) + FILE_HEADROOM_BYTES


LEDGER_ENV = "AMDKV_DISK_LEDGER_DIR"  # where the machine's reservations live (default: /dev/shm, per user)


def default_ledger_root() -> Path:
    """The folder every amdkv process of this user on this machine keeps its disk reservations in:
    `AMDKV_DISK_LEDGER_DIR`, else a folder of this user in /dev/shm (memory, machine-wide, gone at a
    reboot, like the reservations), else in the temp folder."""
    configured = os.environ.get(LEDGER_ENV)
    if configured:
        return Path(configured)
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else tempfile.gettempdir()
    return Path(base) / f"amdkv-disk-admission-{os.getuid()}"


def reference_disk_need(metadata: dict[str, Any], n_cases: int, trials: int) -> int:
    """Bytes a task's reference run writes to the cache for `trials` seeded trials, from the loader's
    `reference_trial_bytes` (one trial's inputs, eager outputs and float64 goldens: the KernelBench
    loader sizes them on the meta device before anything runs); 0 when the task does not say, or has
    several cases (the figure is its first case's). A reference is admitted like a candidate, so two
    of KernelBench's largest (tens of GB each) do not fill a disk together under `amdkv eval`."""
    per_trial = metadata.get("reference_trial_bytes")
    if not isinstance(per_trial, int) or per_trial <= 0 or n_cases != 1:
        return 0
    return trials * per_trial


class _Ledger:
    """One file system's reservations on this machine: a file per admitted candidate, holding its need,
    flock'ed by its holder for as long as it holds. A file nobody holds is a dead holder's (a killed
    process): removed when seen. Scans and new reservations happen under the folder's `.lock`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._names = itertools.count()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fd = os.open(self.folder / ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def live(self) -> tuple[int, int]:
        """(bytes reserved, reservations) of the living holders; a dead holder's file is removed."""
        reserved = count = 0
        for entry in os.scandir(self.folder):
            if entry.name.startswith("."):
                continue
            try:
                fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:  # released meanwhile
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # held: a living reservation
                    reserved += int(os.read(fd, 32) or b"0")
                    count += 1
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
            finally:
                os.close(fd)
        return reserved, count

    def reserve(self, need_bytes: int) -> tuple[str, int]:
        """A reservation of `need_bytes` held by this process until `release`: (its path, its fd)."""
        path = str(self.folder / f"{os.getpid()}-{threading.get_ident()}-{next(self._names)}")
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, str(need_bytes).encode())
        return path, fd

    @staticmethod
    def release(reservation: tuple[str, int]) -> None:
        path, fd = reservation
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


class DiskAdmission:
    """The disk reservations of the candidates running on this machine, per file system: every
    process of this user shares them through a ledger folder (`root`, default_ledger_root), so
    several `amdkv eval`s, an `amdkv serve` beside them, or Ray's one process per GPU do not fill a
    disk together. Within a process, a release wakes the waiters at once; across processes they
    look again every WAIT_POLL_S. Where the ledger folder cannot be made, this process keeps a
    private one (said once on stderr): its candidates still wait for each other."""

    def __init__(self, free: Callable[[str], int] = free_bytes, root: str | os.PathLike[str] | None = None) -> None:
        self._free = free
        self.root = Path(root) if root is not None else None  # None: default_ledger_root() when first used
        self._cond = threading.Condition()
        self._ledgers: dict[tuple[Path, int], _Ledger] = {}

    def _ledger(self, device: int) -> _Ledger:
        root = self.root or default_ledger_root()
        with self._cond:
            ledger = self._ledgers.get((root, device))
            if ledger is None:
                folder = root / str(device)
                try:
                    root.mkdir(parents=True, exist_ok=True, mode=0o700)  # this user's alone
                    folder.mkdir(exist_ok=True, mode=0o700)
                except OSError as exc:
                    folder = Path(tempfile.mkdtemp(prefix="amdkv-disk-admission-"))
                    print(f"amdkv: the disk-admission ledger {root} cannot be made ({exc}); candidates of other "
                          f"processes are not seen (set {LEDGER_ENV})", file=sys.stderr, flush=True)
                ledger = self._ledgers[(root, device)] = _Ledger(folder)
            return ledger

    @contextlib.contextmanager
    def admitted(self, folder: str, need_bytes: int, floor_bytes: int,
                 cancelled: Callable[[], bool] = lambda: False,
                 reclaim: Callable[[int], int] | None = None) -> Iterator[float]:
        """Inside: the candidate's run and judging. Yields the seconds it waited (0.0 at once).

        `reclaim(short_bytes) -> bytes freed`: space that is not a running candidate's and can be given
        up (the reference cache's unused entries, `ReferencesMixin.reclaimer`). Asked for the part of the
        need no waiting can bring: what the free space plus every live reservation (all the running ones
        could give back) still lacks; alone, that is the whole shortfall. Asked again only after the
        ledger changed, so a waiter does not walk the cache every poll."""
        ledger = self._ledger(os.stat(folder).st_dev)
        t0 = time.monotonic()
        asked_at: tuple[int, int] | None = None  # the ledger's (reserved, running) when reclaim was last asked
        while True:
            with ledger.locked():
                reserved, running = ledger.live()
                free = self._free(folder)
                beyond_waiting = need_bytes + floor_bytes - free - reserved
                if reclaim is not None and beyond_waiting > 0 and asked_at != (reserved, running):
                    asked_at = (reserved, running)
                    if reclaim(beyond_waiting):
                        free = self._free(folder)
                if not running or cancelled() or free - reserved - floor_bytes >= need_bytes:
                    reservation = ledger.reserve(need_bytes)
                    break
            with self._cond:
                self._cond.wait(WAIT_POLL_S)
        try:
            yield time.monotonic() - t0
        finally:
            ledger.release(reservation)
            with self._cond:
                self._cond.notify_all()


ADMISSION = DiskAdmission()  # this process's door to the machine's ledger
