"""fast_p, geometric-mean speedups and mean sol, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from amdkv.metrics import (MetricInputError, SampleResult, fast_p, geomean_speedup,
                           geomean_speedup_all, mean_sol)


def ok(task, idx, speedup, *, sol=None, platform="rocm", turn=None):
    return SampleResult(task, idx, turn=turn, compiled=True, correct=True, status="ok",
                        speedup=speedup, sol=sol, platform=platform)


def fail(task, idx, *, platform="rocm", turn=None, status="mismatch"):
    return SampleResult(task, idx, turn=turn, compiled=status != "compile_error",
                        correct=False, status=status, platform=platform)


def suite():
    """a: 4.0x, b: failed, c: 0.5x, d: exactly 1.0x — one sample each."""
    return [ok("a", 0, 4.0, sol=0.6), fail("b", 0), ok("c", 0, 0.5, sol=0.2), ok("d", 0, 1.0)]


def test_fast_p_counts_all_tasks_in_the_denominator():
    m = fast_p(suite(), 1.0, bootstrap=0)
    assert m.value == pytest.approx(1 / 4)   # only a; d is not > 1.0
    assert m.n == 4 and m.platform == "rocm" and m.name == "fast_1.0"
    assert fast_p(suite(), 0.4, bootstrap=0).value == pytest.approx(3 / 4)
    assert fast_p(suite(), 4.0, bootstrap=0).value == 0.0


def test_fast_0_is_the_correct_fraction():
    assert fast_p(suite(), 0, bootstrap=0).value == pytest.approx(3 / 4)
    assert fast_p(suite(), 0, bootstrap=0).name == "fast_0.0"


def test_fast_p_with_several_samples_is_the_per_sample_rate():
    results = [ok("a", 0, 2.0), fail("a", 1), ok("a", 2, 0.9), ok("b", 0, 3.0)]
    # a: 1 of 3 samples is correct and > 1; b: 1 of 1
    assert fast_p(results, 1.0, bootstrap=0).value == pytest.approx((1 / 3 + 1) / 2)


def test_geomean_over_correct_tasks():
    m = geomean_speedup(suite(), bootstrap=0)
    assert m.value == pytest.approx((4.0 * 0.5 * 1.0) ** (1 / 3))
    assert m.n == 3 and m.details["n_samples"] == 3


def test_geomean_all_counts_a_failed_task_as_one():
    m = geomean_speedup_all(suite(), bootstrap=0)
    assert m.value == pytest.approx((4.0 * 1.0 * 0.5 * 1.0) ** (1 / 4))
    assert m.n == 4
    # solving only the easy task: correct-only geomean rewards it, the all-tasks one does not
    easy_only = [ok("a", 0, 9.0), fail("b", 0), fail("c", 0)]
    assert geomean_speedup(easy_only, bootstrap=0).value == pytest.approx(9.0)
    assert geomean_speedup_all(easy_only, bootstrap=0).value == pytest.approx(9.0 ** (1 / 3))


def test_per_task_speedup_is_geomean_over_correct_samples():
    results = [ok("a", 0, 2.0), ok("a", 1, 8.0), fail("a", 2), ok("b", 0, 1.0)]
    # a: sqrt(2*8) = 4 over correct samples; b: 1 -> sqrt(4*1) = 2
    assert geomean_speedup(results, bootstrap=0).value == pytest.approx(2.0)
    # all: a = (2*8*1)^(1/3) = 16^(1/3); b = 1
    assert geomean_speedup_all(results, bootstrap=0).value == pytest.approx(16 ** (1 / 6))


def test_agent_run_uses_its_fastest_correct_turn():
    results = [fail("a", 0, turn=0), ok("a", 0, 1.5, turn=1), ok("a", 0, 3.0, turn=2)]
    assert geomean_speedup(results, bootstrap=0).value == pytest.approx(3.0)


def test_mixed_platforms_are_never_pooled():
    results = [ok("a", 0, 2.0, platform="cuda"), ok("b", 0, 8.0, platform="rocm")]
    for fn in (geomean_speedup, geomean_speedup_all, mean_sol):
        with pytest.raises(MetricInputError, match="never pooled"):
            fn(results)
    with pytest.raises(MetricInputError, match="never pooled"):
        fast_p(results, 1.0)


def test_cpu_platform_reports_no_speed():
    results = [SampleResult("a", 0, correct=True, status="ok", platform="cpu")]
    for m in (fast_p(results, 1.0), geomean_speedup(results), geomean_speedup_all(results),
              mean_sol(results)):
        assert not m.reportable and m.value is None and "cpu" in m.reason


def test_correct_samples_without_speedup_are_left_out_and_counted():
    results = [ok("a", 0, 2.0), ok("b", 0, None), fail("c", 0)]
    m = geomean_speedup_all(results, bootstrap=0)
    assert m.value == pytest.approx(math.sqrt(2.0)) and m.n == 2
    assert m.details["n_correct_without_speedup"] == 1
    none_timed = [ok("a", 0, None)]
    assert not geomean_speedup(none_timed).reportable


def test_no_correct_task_on_a_gpu():
    results = [fail("a", 0), fail("b", 0, status="compile_error")]
    assert fast_p(results, 1.0, bootstrap=0).value == 0.0
    assert geomean_speedup_all(results, bootstrap=0).value == 1.0
    m = geomean_speedup(results, bootstrap=0)
    assert not m.reportable and "no task has a correct sample" in m.reason


def test_mean_sol_over_correct_samples_with_sol():
    m = mean_sol(suite(), bootstrap=0)
    assert m.value == pytest.approx((0.6 + 0.2) / 2) and m.n == 2
    results = [ok("a", 0, 2.0, sol=0.2), ok("a", 1, 2.0, sol=0.4), ok("b", 0, 1.0, sol=0.9)]
    assert mean_sol(results, bootstrap=0).value == pytest.approx((0.3 + 0.9) / 2)


def test_bad_p():
    for p in (-0.5, float("nan"), "1"):
        with pytest.raises(MetricInputError):
            fast_p(suite(), p)
