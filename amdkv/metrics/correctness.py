"""corr@k, compile@k and their agent-turn readings (DESIGN.md section 5).

The paper's Corr@k is not defined publicly, so both readings are reported under their own names:

* `corr@k`: mean over tasks of the unbiased pass@k of correctness over independent samples
  (runs). Reported only when every task has at least k judged runs. `pass@k` is the same number.
* `corr@k_turns`: mean over tasks of the fraction of the task's agent runs that reach a correct
  candidate within their first k refinement turns; with one run per task this is the fraction
  of tasks solved within k turns.

`compile@k` / `compile@k_turns` are the same with "compiled" in place of "correct".
"""

from __future__ import annotations

from typing import Any, Callable

from amdkv.metrics.errors import MetricInputError
from amdkv.metrics.grouping import Results, Run, TaskResults, as_tasks
from amdkv.metrics.metric import Metric, mean_metric, not_reportable
from amdkv.metrics.passk import pass_at_k
from amdkv.metrics.records import SampleResult


def check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise MetricInputError(f"k = {k!r} is not an int >= 1", hint="ask for k = 1, 2, 3, ...")
    return k


def _scope(tasks: list[TaskResults]) -> tuple[list[TaskResults], dict[str, Any]]:
    """Tasks with at least one judged run, plus the details every correctness entry carries."""
    scored = [t for t in tasks if t.judged_runs]
    platforms = sorted({p for t in tasks for p in t.platforms})
    details: dict[str, Any] = {"n_samples": sum(len(t.judged_runs) for t in scored)}
    if len(platforms) > 1:
        details["platforms"] = platforms
    dropped = [t.task_id for t in tasks if not t.judged_runs]
    if dropped:
        details["tasks_without_judged_samples"] = dropped
    return scored, details


def _platform(tasks: list[TaskResults]) -> str | None:
    platforms = {p for t in tasks for p in t.platforms}
    return platforms.pop() if len(platforms) == 1 else None


def _unbiased_at_k(tasks: list[TaskResults], k: int, name: str, what: str,
                   is_event: Callable[[Run], bool], bootstrap: int, seed: int) -> Metric:
    aggregation = (f"mean over tasks of the unbiased pass@{k} of {what} over independent "
                   f"samples (1 - C(n-c,{k})/C(n,{k}) per task)")
    scored, details = _scope(tasks)
    details["k"] = k
    short = {t.task_id: len(t.judged_runs) for t in scored if len(t.judged_runs) < k}
    if short:
        return not_reportable(
            name, aggregation,
            f"{len(short)} task(s) have fewer than k={k} judged samples; the unbiased "
            f"estimator needs n >= k for every task", n=len(scored),
            platform=_platform(tasks), tasks_with_too_few_samples=short, **details)
    per_task = [pass_at_k(len(t.judged_runs), sum(map(is_event, t.judged_runs)), k)
                for t in scored]
    return mean_metric(name, per_task, aggregation, bootstrap=bootstrap, seed=seed,
                       platform=_platform(tasks), **details)


def _within_turns(tasks: list[TaskResults], k: int, name: str, what: str,
                  is_event: Callable[[SampleResult], bool], bootstrap: int,
                  seed: int) -> Metric:
    aggregation = (f"mean over tasks of the fraction of the task's agent runs with a {what} "
                   f"candidate within the first {k} turn(s)")
    scored, details = _scope(tasks)
    details["k"] = k
    cut = {t.task_id: sum(1 for r in t.judged_runs if not r.covers(k, is_event))
           for t in scored}
    cut = {tid: m for tid, m in cut.items() if m}
    if cut:
        return not_reportable(
            name, aggregation,
            f"{len(cut)} task(s) have runs that stopped before turn {k} without a {what} "
            f"candidate, so 'within {k} turns' is unknown for them", n=len(scored),
            platform=_platform(tasks), tasks_with_runs_cut_short=cut, **details)
    per_task = [sum(r.within(k, is_event) for r in t.judged_runs) / len(t.judged_runs)
                for t in scored]
    return mean_metric(name, per_task, aggregation, bootstrap=bootstrap, seed=seed,
                       platform=_platform(tasks), **details)


def _is_correct(s: SampleResult) -> bool:
    return s.is_correct


def _is_compiled(s: SampleResult) -> bool:
    return s.is_compiled


def corr_at_k(results: Results, k: int, *, bootstrap: int = 1000, seed: int = 0,
              strict: bool = False, name: str | None = None) -> Metric:
    """`corr@k`: mean over tasks of unbiased pass@k of correctness over independent runs.

    A task with fewer than k judged runs makes the metric not reportable (an entry naming
    those tasks), or raises `MetricInputError` when `strict`. `name` renames the entry (used
    for the `pass@k` alias).
    """
    k = check_k(k)
    m = _unbiased_at_k(as_tasks(results), k, name or f"corr@{k}", "correctness",
                       lambda r: r.correct, bootstrap, seed)
    return _maybe_raise(m, strict)


def compile_at_k(results: Results, k: int, *, bootstrap: int = 1000, seed: int = 0,
                 strict: bool = False) -> Metric:
    """`compile@k`: as `corr_at_k`, counting compiled runs instead of correct ones."""
    k = check_k(k)
    m = _unbiased_at_k(as_tasks(results), k, f"compile@{k}", "compilation",
                       lambda r: r.compiled, bootstrap, seed)
    return _maybe_raise(m, strict)


def corr_at_k_turns(results: Results, k: int, *, bootstrap: int = 1000, seed: int = 0,
                    strict: bool = False) -> Metric:
    """`corr@k_turns`: fraction of (tasks' agent runs) correct within the first k turns.

    Single-shot samples (turn None) are runs of one turn. A run with fewer than k turns and
    no correct turn was cut short; its task makes the metric not reportable.
    """
    k = check_k(k)
    m = _within_turns(as_tasks(results), k, f"corr@{k}_turns", "correct", _is_correct,
                      bootstrap, seed)
    return _maybe_raise(m, strict)


def compile_at_k_turns(results: Results, k: int, *, bootstrap: int = 1000, seed: int = 0,
                       strict: bool = False) -> Metric:
    """`compile@k_turns`: as `corr_at_k_turns`, for compilation."""
    k = check_k(k)
    m = _within_turns(as_tasks(results), k, f"compile@{k}_turns", "compiled", _is_compiled,
                      bootstrap, seed)
    return _maybe_raise(m, strict)


def _maybe_raise(m: Metric, strict: bool) -> Metric:
    if strict and not m.reportable:
        raise MetricInputError(f"{m.name} cannot be reported: {m.reason}; details: "
                               f"{ {k: v for k, v in m.details.items() if k.startswith('tasks_')} }",
                               hint="draw more samples (or longer runs) for the tasks named, "
                                    "or ask for a smaller k")
    return m
