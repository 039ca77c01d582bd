"""`compute_metrics`: the whole report, as one flat JSON-serialisable dict.

This is what `amdkv eval` writes to `metrics.json` and what the `evaluate` modules wrap, so it
only assembles: every number comes from `correctness` or `speedup`. docs/metrics.md describes
each key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Sequence

from amdkv.metrics.bootstrap import DEFAULT_LEVEL, DEFAULT_RESAMPLES, check_bootstrap_args
from amdkv.metrics.correctness import (check_k, compile_at_k, compile_at_k_turns, corr_at_k,
                                       corr_at_k_turns)
from amdkv.metrics.errors import MetricInputError
from amdkv.metrics.grouping import TaskResults, group_by_task
from amdkv.metrics.metric import Metric
from amdkv.metrics.records import UNJUDGED_STATUSES, SampleResult
from amdkv.metrics.speedup import (check_p, fast_p, geomean_speedup,
                                   geomean_speedup_all, mean_sol)

SCHEMA_VERSION = 1
BREAKDOWN_DIMENSIONS = ("level", "op_family", "dtype", "platform")


def _speed_metrics(tasks: list[TaskResults], ps: Sequence[float], bootstrap: int,
                   seed: int) -> list[Metric]:
    """The speed metrics of one platform's tasks."""
    out = [fast_p(tasks, p, bootstrap=bootstrap, seed=seed) for p in ps]
    out.append(geomean_speedup(tasks, bootstrap=bootstrap, seed=seed))
    out.append(geomean_speedup_all(tasks, bootstrap=bootstrap, seed=seed))
    out.append(mean_sol(tasks, bootstrap=bootstrap, seed=seed))
    return out


def _by_platform(samples: Iterable[SampleResult]) -> dict[str, list[SampleResult]]:
    groups: dict[str, list[SampleResult]] = {}
    for s in samples:
        groups.setdefault(s.platform_label, []).append(s)
    return dict(sorted(groups.items()))


def _speed_entries(tasks: list[TaskResults], ps: Sequence[float], bootstrap: int,
                   seed: int) -> dict[str, dict[str, Any]]:
    """Speed entries for a group; when the group spans platforms each entry is marked not
    reportable and carries the per-platform numbers under `per_platform` (never pooled)."""
    samples = [s for t in tasks for s in t.samples]
    platforms = _by_platform(samples)
    if len(platforms) == 1:
        return {m.name: m.to_dict() for m in _speed_metrics(tasks, ps, bootstrap, seed)}
    per_platform = {p: _speed_metrics(group_by_task(ss), ps, bootstrap, seed)
                    for p, ss in platforms.items()}
    out: dict[str, dict[str, Any]] = {}
    for i, first in enumerate(next(iter(per_platform.values()))):
        out[first.name] = {
            "name": first.name, "value": None, "n": 0, "ci95": None,
            "aggregation": first.aggregation, "platform": None, "reportable": False,
            "reason": (f"results span platforms {sorted(platforms)}; speedups from different "
                       f"platforms are never pooled, see per_platform"),
            "per_platform": {p: ms[i].to_dict() for p, ms in per_platform.items()}}
    return out


def metric_set(tasks: list[TaskResults], *, ks: Sequence[int], ps: Sequence[float],
               bootstrap: int, seed: int, with_turns: bool) -> dict[str, Any]:
    """Every metric for one set of tasks (the whole run, or one breakdown group)."""
    out: dict[str, Any] = {"n_tasks": len(tasks),
                           "n_samples": sum(len(t.samples) for t in tasks)}
    kw = {"bootstrap": bootstrap, "seed": seed}
    for k in ks:
        corr = corr_at_k(tasks, k, **kw)
        alias = corr.to_dict()
        alias["name"] = f"pass@{k}"
        alias["aggregation"] = f"alias of corr@{k}: " + corr.aggregation
        out[f"pass@{k}"] = alias
        out[f"corr@{k}"] = corr.to_dict()
        out[f"compile@{k}"] = compile_at_k(tasks, k, **kw).to_dict()
        if with_turns:
            out[f"corr@{k}_turns"] = corr_at_k_turns(tasks, k, **kw).to_dict()
            out[f"compile@{k}_turns"] = compile_at_k_turns(tasks, k, **kw).to_dict()
    out.update(_speed_entries(tasks, ps, bootstrap, seed))
    return out


def _breakdowns(tasks: list[TaskResults], samples: list[SampleResult],
                **kw: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for dim in BREAKDOWN_DIMENSIONS:
        if dim == "platform":
            groups = {p: group_by_task(ss) for p, ss in _by_platform(samples).items()}
        else:
            groups = {}
            for t in tasks:
                groups.setdefault(t.group_label(dim), []).append(t)
        out[dim] = {g: metric_set(ts, **kw) for g, ts in sorted(groups.items())}
    return out


def _normalise(ks: Iterable[int], ps: Iterable[float]) -> tuple[list[int], list[float]]:
    ks_ = sorted({check_k(k) for k in ks})
    ps_ = sorted({check_p(p) for p in ps})
    if not ks_:
        raise MetricInputError("ks is empty", hint="pass e.g. ks=(1, 3)")
    return ks_, ps_


def compute_metrics(results: Sequence[SampleResult], ks: Iterable[int] = (1, 3),
                    ps: Iterable[float] = (1.0,), bootstrap: int = DEFAULT_RESAMPLES,
                    seed: int = 0) -> dict[str, Any]:
    """Score a list of `SampleResult`s; return the flat report written to `metrics.json`.

    Keys: `pass@k`, `corr@k`, `compile@k` for each k (and `corr@k_turns`, `compile@k_turns`
    when any record has a turn), `fast_<p>` for each p, `geomean_speedup`,
    `geomean_speedup_all`, `mean_sol`; each an entry with value, n, ci95, aggregation and
    platform. Plus `n_tasks`, `n_samples`, `n_runs`, `platforms`, `excluded_samples`,
    `breakdowns` (level, op_family, dtype, platform → group → the same metric set),
    `settings` and `schema_version`. Speed metrics are never pooled across platforms.
    """
    ks_, ps_ = _normalise(ks, ps)
    check_bootstrap_args(bootstrap, DEFAULT_LEVEL, seed)
    samples = list(results)
    if not samples:
        raise MetricInputError("no sample results given; there is nothing to score",
                               hint="pass the SampleResult records of an evaluation run")
    tasks = group_by_task(samples)
    kw: dict[str, Any] = {"ks": ks_, "ps": ps_, "bootstrap": bootstrap, "seed": seed,
                          "with_turns": any(s.turn is not None for s in samples)}
    excluded = Counter(s.status for s in samples if s.status in UNJUDGED_STATUSES)
    report: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "platforms": sorted({s.platform_label for s in samples}),
        "n_runs": sum(len(t.runs) for t in tasks),
        "excluded_samples": {st: excluded.get(st, 0) for st in UNJUDGED_STATUSES},
    }
    report.update(metric_set(tasks, **kw))
    report["breakdowns"] = _breakdowns(tasks, samples, **kw)
    report["settings"] = {"ks": ks_, "ps": ps_, "bootstrap": bootstrap, "seed": seed,
                          "ci_level": DEFAULT_LEVEL, "with_turns": kw["with_turns"]}
    return report
