"""Group sample records into agent runs and tasks, checking that they fit together.

A *run* is one independent attempt at a task: a single-shot sample, or one agent trajectory
whose turns are refinement steps. Runs are what pass@k treats as independent samples; turns
inside a run are not independent (each sees the previous verdict), so they are never counted
as separate samples. A run is identified by (task_id, platform, sample_index).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable, Sequence, Union

from amdkv.metrics.errors import MetricInputError
from amdkv.metrics.records import UNKNOWN, SampleResult


@dataclasses.dataclass(frozen=True)
class Run:
    """The samples of one run, in turn order (one sample when single-shot)."""

    task_id: str
    sample_index: int
    platform: str | None
    samples: tuple[SampleResult, ...]

    @property
    def judged(self) -> bool:
        """A run counts when at least one of its turns was judged (not infra/unverifiable)."""
        return any(s.judged for s in self.samples)

    @property
    def correct(self) -> bool:
        """An agent keeps its best correct candidate, so a run is correct if any turn is."""
        return any(s.is_correct for s in self.samples)

    @property
    def compiled(self) -> bool:
        return any(s.is_compiled for s in self.samples)

    def within(self, k: int, event: Callable[[SampleResult], bool]) -> bool:
        """Did `event` happen in the first k turns (by position in turn order)?"""
        return any(event(s) for s in self.samples[:k])

    def covers(self, k: int, event: Callable[[SampleResult], bool]) -> bool:
        """Can "event within k turns" be decided? Yes if the run has >= k turns or the event
        happened at all (the agent may stop early once it succeeds); otherwise the run was cut
        short and "within k" is unknown."""
        return len(self.samples) >= k or any(event(s) for s in self.samples)

    @property
    def chosen(self) -> SampleResult | None:
        """The candidate the run hands back: its fastest correct sample (first on ties, and
        the first correct one when none was timed); None when no turn is correct."""
        correct = [s for s in self.samples if s.is_correct]
        if not correct:
            return None
        timed = [s for s in correct if s.speedup is not None]
        if not timed:
            return correct[0]
        return max(timed, key=lambda s: s.speedup)  # max keeps the first of equal values


@dataclasses.dataclass(frozen=True)
class TaskResults:
    """All runs of one task, with the task's metadata (identical across its samples)."""

    task_id: str
    level: int | str | None
    op_family: str | None
    dtype: str | None
    runs: tuple[Run, ...]

    @property
    def samples(self) -> tuple[SampleResult, ...]:
        return tuple(s for r in self.runs for s in r.samples)

    @property
    def judged_runs(self) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.judged)

    @property
    def platforms(self) -> tuple[str, ...]:
        return tuple(sorted({s.platform_label for s in self.samples}))

    def group_label(self, dimension: str) -> str:
        """The breakdown group of this task along `dimension` (level, op_family, dtype)."""
        value = getattr(self, dimension)
        return UNKNOWN if value is None else str(value)


def _check_unique(samples: Sequence[SampleResult]) -> None:
    """Reject duplicates, and one sample scored on two platforms (which would be counted
    twice as an independent sample)."""
    seen: dict[tuple[str, int, int | None], SampleResult] = {}
    for s in samples:
        key = (s.task_id, s.sample_index, s.turn)
        prev = seen.get(key)
        if prev is None:
            seen[key] = s
            continue
        where = f"task {s.task_id!r} sample {s.sample_index}" + (
            "" if s.turn is None else f" turn {s.turn}")
        if prev.platform_label != s.platform_label:
            raise MetricInputError(
                f"{where} appears for platforms {prev.platform_label!r} and "
                f"{s.platform_label!r}: the same candidate verified on several platforms "
                f"would be counted twice",
                hint="score each platform on its own, e.g. "
                     "compute_metrics([r for r in results if r.platform == 'rocm'])")
        raise MetricInputError(f"{where} appears twice",
                               hint="give every sample of a task its own sample_index "
                                    "(and every turn of a run its own turn number)")


def _make_run(samples: list[SampleResult]) -> Run:
    first = samples[0]
    if len(samples) > 1 and any(s.turn is None for s in samples):
        raise MetricInputError(
            f"task {first.task_id!r} sample {first.sample_index} has several records but not "
            f"all of them carry a turn number",
            hint="set `turn` on every record of an agent run, or give single-shot samples "
                 "distinct sample_index values")
    ordered = sorted(samples, key=lambda s: -1 if s.turn is None else s.turn)
    return Run(first.task_id, first.sample_index, first.platform, tuple(ordered))


def _make_task(samples: list[SampleResult]) -> TaskResults:
    first = samples[0]
    for field in ("level", "op_family", "dtype"):
        values = {getattr(s, field) for s in samples}
        if len(values) > 1:
            raise MetricInputError(
                f"task {first.task_id!r} has samples with different {field}: "
                f"{sorted(map(repr, values))}",
                hint=f"take {field} from the task's metadata, the same for all its samples")
    by_run: dict[tuple[str, int], list[SampleResult]] = {}
    for s in samples:
        by_run.setdefault((s.platform_label, s.sample_index), []).append(s)
    runs = tuple(_make_run(by_run[key]) for key in sorted(by_run))
    return TaskResults(first.task_id, first.level, first.op_family, first.dtype, runs)


def group_by_task(samples: Iterable[SampleResult]) -> list[TaskResults]:
    """Validate `samples` and group them into tasks sorted by task_id (so that every number,
    bootstrap intervals included, is independent of the input order)."""
    samples = list(samples)
    for s in samples:
        if not isinstance(s, SampleResult):
            raise MetricInputError(f"expected SampleResult records, got {type(s).__name__}",
                                   hint="build records with SampleResult(...) or "
                                        "from_verdict_dict(...)")
    _check_unique(samples)
    by_task: dict[str, list[SampleResult]] = {}
    for s in samples:
        by_task.setdefault(s.task_id, []).append(s)
    return [_make_task(by_task[t]) for t in sorted(by_task)]


Results = Union[Sequence[SampleResult], Sequence[TaskResults]]


def as_tasks(results: Results) -> list[TaskResults]:
    """Accept either sample records or already-grouped tasks (so callers group only once)."""
    results = list(results)
    if results and all(isinstance(r, TaskResults) for r in results):
        return sorted(results, key=lambda t: t.task_id)
    return group_by_task(results)  # type: ignore[arg-type]
