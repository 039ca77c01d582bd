"""Few-shot examples for the `write` request: bundled tasks of `builtin:train` with their reference
solutions, never anything from `builtin:eval` (DESIGN.md section 4: eval tasks are never trained
on, and a prompt that shows one would leak it into every trajectory generated with it).

Which examples: tasks of the train split that have a reference solution in the request's
language, minus the task itself and every task in its near-duplicate cluster (the split's own
clustering, `amdkv.tasks.split`), so no prompt shows the answer to its own task or to a near copy.
Ranked by: same `op_family` first, then closest `level`, then shortest solution, then id; the
choice is deterministic, so a prompt is a pure function of (task, config).
"""

from __future__ import annotations

import dataclasses
import functools

from amdkv.tasks.types import Task

MAX_EXAMPLE_CHARS = 6000  # solutions longer than this are not shown (prompt budget)


@dataclasses.dataclass(frozen=True)
class Example:
    task_id: str
    task_source: str
    solution: str
    split: str


@functools.lru_cache(maxsize=1)
def _builtin_tasks() -> tuple[Task, ...]:
    from amdkv.tasks.suites import load_suite

    return tuple(load_suite("builtin:all"))


def _train_tasks() -> tuple[Task, ...]:
    return tuple(t for t in _builtin_tasks() if t.split == "train")


@functools.lru_cache(maxsize=1)
def _builtin_clusters() -> dict[tuple[str, str], frozenset[str]]:
    """(id, source hash) of every bundled task -> ids of its near-duplicate cluster (computed once)."""
    from amdkv.tasks.split import near_duplicate_clusters

    out = {}
    for cluster in near_duplicate_clusters(list(_builtin_tasks())):
        ids = frozenset(t.id for t in cluster)
        out.update({(t.id, t.source_hash): ids for t in cluster})
    return out


def _related(task: Task, pool: list[Task]) -> frozenset[str]:
    """Ids in `task`'s near-duplicate cluster: cached for bundled tasks, computed for any other."""
    known = _builtin_clusters().get((task.id, task.source_hash))
    if known is not None:
        return known
    from amdkv.tasks.split import related_ids

    probe = Task(id="\0" + task.id, path=task.path, source=task.source)  # never equal to a pool id
    return related_ids(probe, pool)


@functools.lru_cache(maxsize=4)
def _pool(language: str) -> tuple[Example, ...]:
    from amdkv.tasks.builtin import solution_path

    out = []
    for t in _train_tasks():
        path = solution_path(t.id, language)
        if path is None:
            continue
        solution = path.read_text(encoding="utf-8")
        if len(solution) <= MAX_EXAMPLE_CHARS:
            out.append(Example(t.id, t.source, solution, t.split))
    return tuple(out)


def select_examples(task: Task, language: str, shots: int) -> list[Example]:
    """Up to `shots` examples for `task` (see the module docstring)."""
    if shots <= 0:
        return []
    train = {t.id: t for t in _train_tasks()}
    pool = [e for e in _pool(language) if e.task_id != task.id]
    related = _related(task, [train[e.task_id] for e in pool])
    pool = [e for e in pool if e.task_id not in related]

    def rank(e: Example) -> tuple:
        t = train[e.task_id]
        other_family = t.op_family != task.op_family
        level_gap = abs((t.level or 1) - (task.level or 1))
        return other_family, level_gap, len(e.solution), e.task_id

    return sorted(pool, key=rank)[:shots]
