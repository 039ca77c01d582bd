"""Percentile bootstrap over tasks: containment, determinism, known small cases."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from amdkv.metrics import (MetricInputError, SampleResult, bootstrap_mean_ci, geomean_speedup,
                           geomean_speedup_all)


def spread_suite(n_tasks=40, seed=1):
    rng = random.Random(seed)
    out = []
    for i in range(n_tasks):
        if rng.random() < 0.25:
            out.append(SampleResult(f"t{i:03d}", 0, compiled=True, correct=False,
                                    status="mismatch", platform="rocm"))
        else:
            out.append(SampleResult(f"t{i:03d}", 0, compiled=True, correct=True, status="ok",
                                    speedup=math.exp(rng.gauss(0.2, 0.8)), platform="rocm"))
    return out


@pytest.mark.parametrize("fn", [geomean_speedup, geomean_speedup_all])
def test_ci_contains_point_estimate(fn):
    for seed in range(5):
        m = fn(spread_suite(seed=seed), bootstrap=1000, seed=seed)
        lo, hi = m.ci95
        assert lo < m.value < hi
        assert lo > 0


def test_deterministic_for_a_seed_and_seed_matters():
    results = spread_suite()
    a = geomean_speedup_all(results, bootstrap=500, seed=7)
    b = geomean_speedup_all(list(reversed(results)), bootstrap=500, seed=7)
    c = geomean_speedup_all(results, bootstrap=500, seed=8)
    assert a.ci95 == b.ci95       # same seed, input order irrelevant
    assert a.ci95 != c.ci95       # another seed, another draw


def test_two_values_zero_and_one():
    # resampled means of two tasks are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% quantiles are 0 and 1
    assert bootstrap_mean_ci([0.0, 1.0], resamples=4000, seed=0) == (0.0, 1.0)


def test_interval_width_matches_normal_theory():
    rng = np.random.default_rng(123)
    x = rng.normal(0.0, 1.0, size=400)
    lo, hi = bootstrap_mean_ci(x, resamples=4000, seed=3)
    expected = 2 * 1.959964 * x.std(ddof=0) / math.sqrt(x.size)
    assert hi - lo == pytest.approx(expected, rel=0.15)
    assert lo < x.mean() < hi


def test_constant_values_and_single_task_give_a_point_interval():
    assert bootstrap_mean_ci([0.25], resamples=100, seed=0) == (0.25, 0.25)
    assert bootstrap_mean_ci([2.0, 2.0, 2.0], resamples=100, seed=0) == (2.0, 2.0)


def test_nothing_to_resample_gives_none():
    assert bootstrap_mean_ci([], resamples=100, seed=0) is None
    assert bootstrap_mean_ci([1.0, 2.0], resamples=0, seed=0) is None
    assert geomean_speedup(spread_suite(), bootstrap=0).ci95 is None


@pytest.mark.parametrize("kwargs", [{"resamples": -1}, {"resamples": 1.5}, {"level": 1.0},
                                    {"level": 0}, {"seed": -3}])
def test_bad_arguments(kwargs):
    with pytest.raises(MetricInputError):
        bootstrap_mean_ci([1.0, 2.0], **kwargs)
