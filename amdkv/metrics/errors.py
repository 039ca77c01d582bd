"""Errors raised by `amdkv.metrics`.

`MetricInputError` is both an `amdkv.errors.BadInputError` (so the CLI maps it to exit code 2,
"bad input or usage") and a `ValueError` (so callers that only know the standard library can
still catch it the usual way).
"""

from __future__ import annotations

from amdkv.errors import BadInputError


class MetricInputError(BadInputError, ValueError):
    """The numbers or records given to a metric cannot be scored as they are.

    Raised for impossible counts (k > n, c > n, negatives), malformed sample records,
    duplicated samples, and speedups from several platforms handed to a function that would
    have to pool them. The message says what was wrong; `hint` says how to fix it.
    """
