"""Percentile bootstrap over tasks.

Tasks are the unit of resampling because they are the unit the reported numbers average over
(and samples of one task are not independent of each other's difficulty). The generator is
seeded, so a report is reproducible; the same seed gives every metric of a report the same
resampled task sets, so intervals of related metrics move together.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from amdkv.metrics.errors import MetricInputError

DEFAULT_RESAMPLES = 1000
DEFAULT_LEVEL = 0.95


def check_bootstrap_args(resamples: object, level: object = DEFAULT_LEVEL,
                         seed: object = 0) -> None:
    """Raise `MetricInputError` unless resamples is an int >= 0, 0 < level < 1, seed an int >= 0."""
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 0:
        raise MetricInputError(f"bootstrap resamples = {resamples!r} is not an int >= 0",
                               hint="pass e.g. bootstrap=1000, or 0 to skip intervals")
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise MetricInputError(f"confidence level = {level!r} is not between 0 and 1",
                               hint="pass e.g. level=0.95")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise MetricInputError(f"seed = {seed!r} is not an int >= 0", hint="pass e.g. seed=0")


def bootstrap_mean_ci(values: Sequence[float] | np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0, level: float = DEFAULT_LEVEL) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of the mean of `values` (one value per task).

    Draws `resamples` sets of len(values) tasks with replacement and returns the
    (1-level)/2 and 1-(1-level)/2 quantiles of their means. None when there is nothing to
    resample (no values or resamples == 0). Geometric means use it on log values.
    """
    check_bootstrap_args(resamples, level, seed)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise MetricInputError(f"bootstrap needs one value per task, got shape {x.shape}",
                               hint="pass a flat list of per-task values")
    if x.size == 0 or resamples == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    means = x[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)
