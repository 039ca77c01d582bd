"""Speed metrics: fast_p, geometric-mean speedups, mean fraction of roofline (sol).

Platform rule: a speedup is only meaningful on the hardware it was measured on (an H200
timing says nothing about an MI300X), so these functions refuse results that span platforms
(`MetricInputError`); `compute_metrics` reports them per platform instead. The `cpu` platform
(Triton interpreter) measures no speed, so its speed metrics are never reportable.

Per-task values (all estimates for ONE sample, i.e. k = 1, each task weighted equally):

* fast_p: the fraction of the task's samples that are correct with speedup > p. With one
  sample per task this is exactly KernelBench's fast_p; with several it is the unbiased
  estimate of it (the expected value for one sample), which uses every sample instead of an
  arbitrary "first" one.
* geomean_speedup: over tasks with a correct sample, exp(mean over those correct samples of
  log speedup).
* geomean_speedup_all: over all tasks, exp(mean over the task's samples of log speedup, a
  failed sample counting as speedup 1.0), so solving only easy tasks is not rewarded.
* mean_sol: over tasks with a correct sample that has sol, the mean of those sol values.

For an agent run the "sample" is the run and its speedup that of its fastest correct turn
(what the agent hands back). Correct runs without a measured speedup are left out of the speed
metrics and counted in `n_correct_without_speedup`.
"""

from __future__ import annotations

import math
from typing import Any

from amdkv.metrics.errors import MetricInputError
from amdkv.metrics.grouping import Results, Run, TaskResults, as_tasks
from amdkv.metrics.metric import Metric, geomean_metric, mean_metric, not_reportable

NO_TIMING_PLATFORMS = ("cpu",)  # DESIGN.md: the interpreter platform reports no speedups


def check_p(p: object) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or p < 0:
        raise MetricInputError(f"p = {p!r} is not a finite number >= 0",
                               hint="fast_p counts correct samples with speedup > p; pass "
                                    "e.g. p=1.0 (faster than the reference) or p=0")
    return float(p)


def fast_p_name(p: float) -> str:
    """Report key of fast_p: `fast_1.0`, `fast_0.0`, `fast_1.5` (p always printed as float)."""
    return f"fast_{float(p)!r}"


def single_platform(tasks: list[TaskResults]) -> str:
    """The one platform of these results; raise if there are several (never pool speedups)."""
    platforms = sorted({p for t in tasks for p in t.platforms})
    if len(platforms) > 1:
        raise MetricInputError(
            f"results span platforms {platforms}; speedups from different platforms are "
            f"never pooled", hint="filter the results to one platform first, or use "
                                  "compute_metrics, which reports speed metrics per platform")
    if not platforms:
        raise MetricInputError("no results given", hint="pass at least one SampleResult")
    return platforms[0]


class _SpeedView:
    """The runs each speed metric looks at, and why some are left out."""

    def __init__(self, tasks: list[TaskResults]) -> None:
        self.platform = single_platform(tasks)
        self.eligible: list[tuple[str, list[Run]]] = []
        self.n_correct_without_speedup = 0
        self.n_correct = 0
        for t in tasks:
            runs = []
            for r in t.judged_runs:
                if r.correct:
                    self.n_correct += 1
                    chosen = r.chosen
                    if chosen is None or chosen.speedup is None:
                        self.n_correct_without_speedup += 1
                        continue
                runs.append(r)
            if runs:
                self.eligible.append((t.task_id, runs))

    def blocker(self) -> str | None:
        """Why no speed metric can be reported on these results, or None."""
        if self.platform in NO_TIMING_PLATFORMS:
            return (f"platform {self.platform!r} measures no speed (Triton interpreter); "
                    f"speed metrics need a GPU platform")
        if self.n_correct and self.n_correct == self.n_correct_without_speedup:
            return (f"none of the {self.n_correct} correct sample(s) on platform "
                    f"{self.platform!r} has a measured speedup")
        return None

    def details(self) -> dict[str, Any]:
        d: dict[str, Any] = {"n_samples": sum(len(r) for _, r in self.eligible)}
        if self.n_correct_without_speedup:
            d["n_correct_without_speedup"] = self.n_correct_without_speedup
        return d


def _speedup(run: Run) -> float:
    chosen = run.chosen
    assert chosen is not None and chosen.speedup is not None
    return chosen.speedup


def fast_p(results: Results, p: float = 1.0, *, bootstrap: int = 1000, seed: int = 0) -> Metric:
    """fast_p: fraction of all tasks correct with speedup > p (per-sample, k = 1; see module doc)."""
    p = check_p(p)
    name = fast_p_name(p)
    aggregation = (f"mean over tasks of the fraction of the task's samples that are correct "
                   f"with speedup t_ref/t_cand > {p!r} (k=1; KernelBench fast_p)")
    view = _SpeedView(as_tasks(results))
    if view.blocker():
        return not_reportable(name, aggregation, view.blocker(), platform=view.platform, p=p)
    per_task = [sum(1 for r in runs if r.correct and _speedup(r) > p) / len(runs)
                for _, runs in view.eligible]
    return mean_metric(name, per_task, aggregation, bootstrap=bootstrap, seed=seed,
                       platform=view.platform, p=p, **view.details())


def geomean_speedup(results: Results, *, bootstrap: int = 1000, seed: int = 0) -> Metric:
    """Geometric mean over correct tasks of the per-task speedup (geomean over its correct samples)."""
    name = "geomean_speedup"
    aggregation = ("geometric mean over tasks with a correct sample of the per-task speedup "
                   "(geometric mean over the task's correct samples)")
    view = _SpeedView(as_tasks(results))
    if view.blocker():
        return not_reportable(name, aggregation, view.blocker(), platform=view.platform)
    per_task_log = []
    n_samples = 0
    for _, runs in view.eligible:
        logs = [math.log(_speedup(r)) for r in runs if r.correct]
        if logs:
            per_task_log.append(sum(logs) / len(logs))
            n_samples += len(logs)
    details = view.details()
    details["n_samples"] = n_samples
    if not per_task_log:
        return not_reportable(name, aggregation, "no task has a correct sample",
                              platform=view.platform, **details)
    return geomean_metric(name, per_task_log, aggregation, bootstrap=bootstrap, seed=seed,
                          platform=view.platform, **details)


def geomean_speedup_all(results: Results, *, bootstrap: int = 1000, seed: int = 0) -> Metric:
    """Geometric mean over all tasks, a failed sample counting as speedup 1.0."""
    name = "geomean_speedup_all"
    aggregation = ("geometric mean over all tasks of the per-task speedup (geometric mean over "
                   "the task's samples, a failed sample counting as 1.0)")
    view = _SpeedView(as_tasks(results))
    if view.blocker():
        return not_reportable(name, aggregation, view.blocker(), platform=view.platform)
    per_task_log = [sum(math.log(_speedup(r)) if r.correct else 0.0 for r in runs) / len(runs)
                    for _, runs in view.eligible]
    return geomean_metric(name, per_task_log, aggregation, bootstrap=bootstrap, seed=seed,
                          platform=view.platform, **view.details())


def mean_sol(results: Results, *, bootstrap: int = 1000, seed: int = 0) -> Metric:
    """Mean fraction of roofline (sol) over tasks with a correct sample that has sol."""
    name = "mean_sol"
    aggregation = ("mean over tasks with a correct sample that has sol of the per-task mean "
                   "sol (fraction of roofline) of those samples")
    tasks = as_tasks(results)
    platform = single_platform(tasks)
    if platform in NO_TIMING_PLATFORMS:
        return not_reportable(name, aggregation, f"platform {platform!r} measures no speed, "
                              f"so no fraction of roofline", platform=platform)
    per_task: list[float] = []
    n_samples = 0
    for t in tasks:
        sols = [r.chosen.sol for r in t.judged_runs
                if r.chosen is not None and r.chosen.sol is not None]
        if sols:
            per_task.append(sum(sols) / len(sols))
            n_samples += len(sols)
    if not per_task:
        return not_reportable(name, aggregation, "no correct sample has a sol value",
                              platform=platform)
    return mean_metric(name, per_task, aggregation, bootstrap=bootstrap, seed=seed,
                       platform=platform, n_samples=n_samples)
