"""A gate that many threads pass at once (shared) or one alone (exclusive).

Why: a task's reference runs uncapped on the GPU it is verified on, beside other references. When
several large ones start together (a cold `amdkv gen` over 68 tasks, next to a served model), one can
run out of GPU memory although it fits the card alone: 9 references did on the H100 of 2026-12-05 while
one worker held 38 GB. A reference that ran out of memory is run once more exclusively: it waits for
the references in flight and keeps new ones out until it is done (references.py). Standard library only.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class SharedExclusiveGate:
    """Shared holders pass together; an exclusive holder waits until none is inside and, while it
    waits or holds, new shared holders wait (so it is not starved by a stream of them)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._exclusive_waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
