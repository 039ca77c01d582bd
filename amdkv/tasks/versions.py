"""Suite versions: a short hash that changes whenever any task's source changes.

A module of its own (not in suites.py) because the task loader stamps every bundled task with the
bundle's version, and suites.py imports the loader: keeping the version here lets both import it
without a loader <-> suites import cycle (benchmarks/import_graph.py).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Iterable

from amdkv.tasks import builtin
from amdkv.tasks.types import Task


@functools.lru_cache(maxsize=1)
def builtin_suite_version() -> str:
    """Version of the whole bundle (recorded in every verdict on a bundled task): the same
    whichever subset was loaded, and different as soon as any bundled task changes."""
    return suite_version([Task(id=p.stem, path=str(p), source=p.read_text()) for p in builtin.task_files()])


def suite_version(tasks: Iterable[Task]) -> str:
    """Changes whenever any task's source changes (recorded in verdicts and datasets)."""
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.id):
        h.update(f"{t.id}:{t.source_hash}\n".encode())
    return h.hexdigest()[:12]
