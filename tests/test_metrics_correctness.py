"""corr@k, compile@k and the agent-turn readings, against hand-computed values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from amdkv.metrics import (MetricInputError, SampleResult, compile_at_k, compile_at_k_turns,
                           corr_at_k, corr_at_k_turns)


def sample(task, idx, ok, *, turn=None, compiled=None, status=None, platform="cuda"):
    if status is None:
        status = "ok" if ok else "mismatch"
    if compiled is None:
        compiled = status != "compile_error"
    return SampleResult(task, idx, turn=turn, compiled=compiled,
                        correct=ok, status=status, platform=platform)


def three_tasks():
    """a: 1 of 3 correct, b: 0 of 3, c: 3 of 3. Task b's samples do not compile."""
    out = [sample("a", i, i == 0) for i in range(3)]
    out += [sample("b", i, False, compiled=False, status="compile_error") for i in range(3)]
    out += [sample("c", i, True) for i in range(3)]
    return out


@pytest.mark.parametrize("k,expected", [
    (1, (Fraction(1, 3) + 0 + 1) / 3),
    # a: 1 - C(2,2)/C(3,2) = 2/3
    (2, (Fraction(2, 3) + 0 + 1) / 3),
    # n = k: a task with any correct sample scores 1
    (3, (1 + 0 + Fraction(1)) / 3),
])
def test_corr_at_k_hand_values(k, expected):
    m = corr_at_k(three_tasks(), k, bootstrap=0)
    assert m.reportable
    assert m.value == pytest.approx(float(expected), abs=1e-15)
    assert m.n == 3
    assert m.details["n_samples"] == 9
    assert f"pass@{k}" in m.aggregation
    assert m.platform == "cuda"


def test_compile_at_k_hand_values():
    # a and c compiled in every sample, b in none
    assert compile_at_k(three_tasks(), 1, bootstrap=0).value == pytest.approx(2 / 3)
    assert compile_at_k(three_tasks(), 3, bootstrap=0).value == pytest.approx(2 / 3)


def test_all_correct_and_none_correct_and_single_task():
    assert corr_at_k([sample("t", i, True) for i in range(4)], 2, bootstrap=0).value == 1.0
    assert corr_at_k([sample("t", i, False) for i in range(4)], 2, bootstrap=0).value == 0.0
    single = corr_at_k([sample("t", 0, True), sample("t", 1, False)], 1, bootstrap=50)
    assert (single.value, single.n) == (0.5, 1)
    assert single.ci95 == (0.5, 0.5)  # one task: every resample is that task


def test_too_few_samples_is_not_reportable_and_names_tasks():
    results = three_tasks() + [sample("d", 0, True)]
    m = corr_at_k(results, 2, bootstrap=0)
    assert not m.reportable and m.value is None
    assert m.details["tasks_with_too_few_samples"] == {"d": 1}
    assert "fewer than k=2" in m.reason
    assert corr_at_k(results, 1, bootstrap=0).reportable
    with pytest.raises(MetricInputError, match="'d': 1"):
        corr_at_k(results, 2, strict=True)


def test_bad_k_raises():
    for k in (0, -1, 1.5, True):
        with pytest.raises(MetricInputError):
            corr_at_k(three_tasks(), k)


def test_infra_error_and_unverifiable_samples_are_left_out():
    results = [sample("a", 0, True), sample("a", 1, False, status="infra_error"),
               sample("b", 0, False), sample("b", 1, False, status="unverifiable"),
               sample("c", 0, False, status="infra_error")]
    m = corr_at_k(results, 1, bootstrap=0)
    # a: 1/1, b: 0/1; c has no judged sample and drops out, named
    assert (m.value, m.n, m.details["n_samples"]) == (0.5, 2, 2)
    assert m.details["tasks_without_judged_samples"] == ["c"]
    # with k = 2, a and b have only one judged sample each
    short = corr_at_k(results, 2, bootstrap=0)
    assert short.details["tasks_with_too_few_samples"] == {"a": 1, "b": 1}


def agent_runs():
    """One agent run per task (sample_index 0), turns numbered from 0.

    a: fails, fails, correct      b: correct at turn 0 and stops
    c: three failing turns        d: compiles only at turn 1, never correct, 3 turns
    """
    return [
        sample("a", 0, False, turn=0, compiled=False, status="compile_error"),
        sample("a", 0, False, turn=1),
        sample("a", 0, True, turn=2),
        sample("b", 0, True, turn=0),
        sample("c", 0, False, turn=0, compiled=False, status="compile_error"),
        sample("c", 0, False, turn=1, compiled=False, status="compile_error"),
        sample("c", 0, False, turn=2, compiled=False, status="compile_error"),
        sample("d", 0, False, turn=0, compiled=False, status="compile_error"),
        sample("d", 0, False, turn=1),
        sample("d", 0, False, turn=2),
    ]


@pytest.mark.parametrize("k,corr,comp", [
    (1, 1 / 4, 1 / 4),   # only b
    (2, 1 / 4, 3 / 4),   # a and d compile at turn 1
    (3, 2 / 4, 3 / 4),
])
def test_turn_metrics_hand_values(k, corr, comp):
    assert corr_at_k_turns(agent_runs(), k, bootstrap=0).value == pytest.approx(corr)
    assert compile_at_k_turns(agent_runs(), k, bootstrap=0).value == pytest.approx(comp)


def test_turns_reading_differs_from_independent_sample_reading():
    # a run is one independent sample: correct if any of its turns is (2 of 4 tasks)
    m = corr_at_k(agent_runs(), 1, bootstrap=0)
    assert (m.value, m.details["n_samples"]) == (0.5, 4)
    assert not corr_at_k(agent_runs(), 2, bootstrap=0).reportable  # one run per task


def test_turn_metric_not_reportable_for_runs_cut_short():
    m = corr_at_k_turns(agent_runs(), 4, bootstrap=0)
    # a and b were correct within their turns, so they count; c and d stopped at 3 turns
    assert not m.reportable
    assert m.details["tasks_with_runs_cut_short"] == {"c": 1, "d": 1}


def test_turn_metric_averages_runs_within_a_task():
    results = [sample("t", 0, True, turn=0),
               sample("t", 1, False, turn=0), sample("t", 1, True, turn=1)]
    assert corr_at_k_turns(results, 1, bootstrap=0).value == pytest.approx(0.5)
    assert corr_at_k_turns(results, 2, bootstrap=0).value == pytest.approx(1.0)


def test_correctness_pools_platforms_but_says_so():
    results = [sample("a", 0, True, platform="cuda"), sample("b", 0, False, platform="rocm")]
    m = corr_at_k(results, 1, bootstrap=0)
    assert m.value == 0.5 and m.platform is None
    assert m.details["platforms"] == ["cuda", "rocm"]
