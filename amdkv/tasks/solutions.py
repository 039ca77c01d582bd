"""Where a task's reference solution lives, whatever suite the task came from.

A task names its solutions in METADATA["solutions"] = {"triton": "relative/path.py", ...}, paths
relative to the task file (procedural suites do this); bundled tasks keep theirs under
amdkv/tasks/builtin/solutions/<language>/<task id>.py.
"""

from __future__ import annotations

from pathlib import Path

from amdkv.tasks import builtin
from amdkv.tasks.types import Task


def solution_for(task: Task, language: str = "triton") -> Path | None:
    """The task's reference solution file in `language`, or None when it has none."""
    rel = (task.metadata.get("solutions") or {}).get(language)
    if rel:
        path = (Path(task.path).parent / rel).resolve()
        return path if path.is_file() else None
    return builtin.solution_path(task.id, language)
