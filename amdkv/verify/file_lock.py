"""One cross-process exclusive lock on a file (`flock`), shared by everything that must run alone:
timed GPU sections (timing.exclusive_gpu) and the one-time precompiled-header build
(backends/hip_pch.py). `flock` is released by the kernel when a holder dies, so a killed worker
never leaves a lock behind."""

from __future__ import annotations

import fcntl
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
