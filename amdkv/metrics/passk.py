"""The unbiased pass@k estimator (Chen et al., 2021) for one task.

With n independent samples of which c pass, the probability that at least one of k samples
drawn without replacement passes is

    pass@k = 1 - C(n - c, k) / C(n, k)

`pass_at_k` returns it as a float: exactly (integer binomials, then one correctly rounded
division) while n is small enough for that to be cheap, and through the numerically stable
product form 1 - prod_{i=n-c+1}^{n} (1 - k / i) beyond that (evaluated in log space with
log1p/expm1), where C(n, k) itself would overflow a float. `pass_at_k_exact` returns the
exact `Fraction` for tests and audits.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction

from amdkv.metrics.errors import MetricInputError

# Up to this n the exact integer form is used (math.comb on a few hundred digits is cheap);
# above it the product form, whose relative error is a few ulp per factor.
EXACT_MAX_N = 2000


def _as_count(name: str, value: object) -> int:
    """Accept Python/numpy integers (not bools, not floats) and return a plain int."""
    if isinstance(value, bool):
        raise MetricInputError(f"{name} must be an integer count, got the bool {value!r}",
                               hint=f"pass {name} as an int, e.g. {name}={int(value)}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise MetricInputError(
            f"{name} must be an integer count, got {value!r} ({type(value).__name__})",
            hint=f"pass {name} as an int (a number of samples)") from None


def check_counts(n: object, c: object, k: object) -> tuple[int, int, int]:
    """Validate (n, c, k) for pass@k and return them as ints; raise `MetricInputError` if not."""
    n_, c_, k_ = _as_count("n", n), _as_count("c", c), _as_count("k", k)
    for name, v in (("n", n_), ("c", c_), ("k", k_)):
        if v < 0:
            raise MetricInputError(f"{name} = {v} is negative; counts of samples cannot be",
                                   hint=f"pass the number of samples ({name} >= 0)")
    if k_ < 1:
        raise MetricInputError(f"k = {k_}: pass@k needs k >= 1",
                               hint="ask for pass@1 or a larger k")
    if c_ > n_:
        raise MetricInputError(
            f"c = {c_} correct samples out of n = {n_}: c cannot exceed n",
            hint="count c among the same n samples (check for duplicated or double-counted samples)")
    if k_ > n_:
        raise MetricInputError(
            f"k = {k_} > n = {n_}: pass@{k_} is not defined with only {n_} sample(s) "
            f"(the unbiased estimator needs n >= k)",
            hint=f"draw at least {k_} samples for this task, or report pass@k for k <= {n_}")
    return n_, c_, k_


def pass_at_k_exact(n: int, c: int, k: int) -> Fraction:
    """Exact unbiased pass@k as a Fraction (same checks as `pass_at_k`)."""
    n, c, k = check_counts(n, c, k)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k for one task with n samples, c of them correct.

    Exact (the float nearest the true rational) for n <= EXACT_MAX_N, product form above.
    Raises `MetricInputError` (a ValueError) when k > n, k < 1, c > n or a count is negative.
    """
    n, c, k = check_counts(n, c, k)
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    if c == 0:
        return 0.0
    if n <= EXACT_MAX_N:
        return float(pass_at_k_exact(n, c, k))
    # log-space product: expm1/log1p keep full relative precision even when pass@k is tiny.
    log_prod = math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1))
    return -math.expm1(log_prod)
