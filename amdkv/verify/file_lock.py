"""Cross-process locks on files (`flock`): one exclusive lock shared by everything that must run
alone (timed GPU sections, timing.exclusive_gpu; the one-time precompiled-header build,
backends/hip_pch.py), and leases: shared holds that a remover takes over only when nobody holds them
(the reference cache's eviction, reference_cache.Leases). `flock` is released by the kernel when a
holder dies, so a killed worker never leaves a lock behind."""

from __future__ import annotations

import contextlib
import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def exclusive_file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing) for the body of the `with`."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def take_shared_lease(path: Path) -> int | None:
    """A shared flock on lease file `path` (created if missing), held until the returned descriptor
    is closed. Blocks only while a remover holds it (`removable_if_unleased`); a lease file the
    remover unlinked meanwhile is not the one its name now means, so the hold is taken again on the
    name's current file. None where `path` cannot be created (a read-only folder: nothing in it can
    be removed by anyone either)."""
    while True:
        fd = _open_lease(path)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if _still_named(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextmanager
def removable_if_unleased(path: Path) -> Iterator[bool]:
    """Yields whether no process holds lease `path`. While it yields True this process holds the
    lease exclusively (no holder can start), and on leaving it unlinks the lease file: what it guards
    is gone by then, and a file left per removed thing would only accumulate."""
    fd = _open_lease(path)
    if fd is None:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        if not _still_named(fd, path):  # another remover took it and unlinked it first
            yield False
            return
        yield True
        with contextlib.suppress(OSError):
            os.unlink(path)
    finally:
        os.close(fd)


def _open_lease(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None


def _still_named(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open at `fd`."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
