"""`Metric`: one reported number with its n, its aggregation and its interval.

Every number amdkv reports says how many tasks it averages over (`n`), how it was aggregated
(`aggregation`, in words), and which platform it describes, so that two reports can only be
compared when they measure the same thing. A number that cannot be reported honestly (too few
samples, platforms that would have to be pooled) is still an entry, with `value` None,
`reportable` False and a `reason`, so its absence is visible rather than silent.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

import numpy as np

from amdkv.metrics.bootstrap import bootstrap_mean_ci


@dataclasses.dataclass(frozen=True)
class Metric:
    """One entry of a metrics report; `to_dict()` is its JSON form."""

    name: str
    value: float | None
    n: int
    aggregation: str
    ci95: tuple[float, float] | None = None
    platform: str | None = None
    reportable: bool = True
    reason: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON-serialisable dict: the fields, then `details` merged in."""
        out: dict[str, Any] = {
            "name": self.name, "value": self.value, "n": self.n,
            "ci95": None if self.ci95 is None else [self.ci95[0], self.ci95[1]],
            "aggregation": self.aggregation, "platform": self.platform,
            "reportable": self.reportable}
        if self.reason is not None:
            out["reason"] = self.reason
        out.update(self.details)
        return out


def not_reportable(name: str, aggregation: str, reason: str, *, n: int = 0,
                   platform: str | None = None, **details: Any) -> Metric:
    """An explicit "cannot be reported" entry (value None) that says why."""
    return Metric(name, None, n, aggregation, None, platform, False, reason, dict(details))


def mean_metric(name: str, per_task: Sequence[float], aggregation: str, *, bootstrap: int,
                seed: int, platform: str | None = None, **details: Any) -> Metric:
    """Arithmetic mean over tasks of one value per task, with a bootstrap interval."""
    x = np.asarray(per_task, dtype=np.float64)
    if x.size == 0:
        return not_reportable(name, aggregation, "no task contributes to this metric",
                              platform=platform, **details)
    ci = bootstrap_mean_ci(x, resamples=bootstrap, seed=seed)
    return Metric(name, float(x.mean()), int(x.size), aggregation, ci, platform, True, None,
                  dict(details))


def geomean_metric(name: str, per_task_log: Sequence[float], aggregation: str, *,
                   bootstrap: int, seed: int, platform: str | None = None,
                   **details: Any) -> Metric:
    """Geometric mean over tasks, given each task's log value: exp(mean of logs). The
    interval is the bootstrap interval of the mean log, mapped back through exp."""
    x = np.asarray(per_task_log, dtype=np.float64)
    if x.size == 0:
        return not_reportable(name, aggregation, "no task contributes to this metric",
                              platform=platform, **details)
    ci = bootstrap_mean_ci(x, resamples=bootstrap, seed=seed)
    if ci is not None:
        ci = (math.exp(ci[0]), math.exp(ci[1]))
    return Metric(name, math.exp(float(x.mean())), int(x.size), aggregation, ci, platform,
                  True, None, dict(details))
