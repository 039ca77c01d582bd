"""pass@k: hand values, edge cases, error messages, and brute force over all k-subsets."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from amdkv.errors import BadInputError
from amdkv.metrics import MetricInputError, pass_at_k, pass_at_k_exact
from amdkv.metrics import passk as passk_module


def brute_force(n: int, c: int, k: int) -> Fraction:
    """Fraction of the k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    hits = sum(1 for s in subsets if any(i < c for i in s))
    return Fraction(hits, len(subsets))


@pytest.mark.parametrize("n,c,k,expected", [
    (1, 1, 1, 1.0),
    (1, 0, 1, 0.0),
    (10, 3, 1, 0.3),        # pass@1 = c / n
    (4, 1, 2, 0.5),         # 1 - C(3,2)/C(4,2) = 1 - 3/6
    (5, 2, 2, 0.7),         # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (5, 2, 3, 0.9),         # 1 - C(3,3)/C(5,3) = 1 - 1/10
    (5, 2, 4, 1.0),         # n - c < k: every 4-subset holds a correct one
    (3, 1, 3, 1.0),         # n = k with c > 0
    (3, 0, 3, 0.0),         # n = k with c = 0
    (7, 7, 3, 1.0),         # all correct
    (7, 0, 3, 0.0),         # none correct
])
def test_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-15)


def test_matches_brute_force_over_all_subsets():
    checked = 0
    for n in range(1, 11):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                exact = brute_force(n, c, k)
                assert pass_at_k_exact(n, c, k) == exact, (n, c, k)
                # the float is the correctly rounded exact value
                assert pass_at_k(n, c, k) == float(exact), (n, c, k)
                checked += 1
    assert checked == sum(n * (n + 1) for n in range(1, 11))


def test_product_form_agrees_with_brute_force(monkeypatch):
    """Force the large-n path (product form in log space) on small n and compare."""
    monkeypatch.setattr(passk_module, "EXACT_MAX_N", 0)
    for n in range(1, 10):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                exact = float(brute_force(n, c, k))
                assert math.isclose(pass_at_k(n, c, k), exact, rel_tol=1e-12, abs_tol=1e-15)


def test_large_n_is_finite_and_close_to_exact(monkeypatch):
    n, c, k = 5000, 3, 10
    exact = float(Fraction(1) - Fraction(math.comb(n - c, k), math.comb(n, k)))
    monkeypatch.setattr(passk_module, "EXACT_MAX_N", 0)
    assert math.isclose(pass_at_k(n, c, k), exact, rel_tol=1e-12)
    # C(100000, 50) overflows a float; the estimator must not
    value = pass_at_k(100_000, 1, 50)
    assert math.isclose(value, 50 / 100_000, rel_tol=1e-9)


def test_k_greater_than_n_says_what_and_how():
    with pytest.raises(MetricInputError) as err:
        pass_at_k(2, 1, 3)
    msg = str(err.value)
    assert "k = 3 > n = 2" in msg
    assert "at least 3 samples" in msg  # the fix


@pytest.mark.parametrize("args,fragment", [
    ((3, 1, 0), "k >= 1"),
    ((3, 4, 1), "c cannot exceed n"),
    ((-1, 0, 1), "n = -1 is negative"),
    ((3, -1, 1), "c = -1 is negative"),
    ((3, 1, -2), "k = -2 is negative"),
    ((3.0, 1, 1), "integer count"),
    ((3, True, 1), "bool"),
])
def test_bad_counts(args, fragment):
    with pytest.raises(MetricInputError, match=fragment):
        pass_at_k(*args)


def test_error_class_hierarchy():
    with pytest.raises(ValueError):
        pass_at_k(1, 0, 2)
    with pytest.raises(BadInputError) as err:
        pass_at_k(1, 0, 2)
    assert err.value.exit_code == 2
    assert err.value.hint


def test_numpy_integers_accepted():
    np = pytest.importorskip("numpy")
    assert pass_at_k(np.int64(4), np.int32(1), np.int64(2)) == pass_at_k(4, 1, 2)
