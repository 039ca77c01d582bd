"""Retries with exponential backoff and full jitter, for transient failures only.

Why our own loop and not the `openai` package's built-in retries: the same policy serves every
client (the OpenAI-compatible one and any later HTTP client), each retry is counted in the run's
token accounting, a `Retry-After` header is honoured, and what counts as transient is decided in
one place per client (`classify`) rather than by each library's defaults (the openai package also
retries 409 Conflict, which is not a server hiccup).
"""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Callable, TypeVar

from amdkv.errors import BadInputError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """`attempts`: tries in all (1 = no retry). The wait before retry k (k = 1, 2, ...) is uniform
    in [0, min(max_delay, base_delay * 2**(k-1))] (full jitter: many clients that failed together
    do not come back together), or the server's Retry-After when it gave one (capped at max_delay)."""

    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 20.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise BadInputError(f"retry policy attempts={self.attempts}, base_delay={self.base_delay}, "
                                f"max_delay={self.max_delay}", hint="attempts >= 1, delays >= 0")

    def delay(self, retry: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        cap = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return (rng or random).uniform(0, cap)


class Transient(Exception):
    """What `classify` returns for a failure worth retrying: the original error, the server's
    Retry-After (seconds) if any, and the error to raise once the attempts run out (`final`,
    default the original)."""

    def __init__(self, original: BaseException, retry_after: float | None = None,
                 final: BaseException | None = None) -> None:
        super().__init__(str(original))
        self.original = original
        self.retry_after = retry_after
        self.final = final if final is not None else original


def call_with_retries(fn: Callable[[], T], *, classify: Callable[[BaseException], BaseException],
                      policy: RetryPolicy, on_retry: Callable[[int, BaseException, float], None] | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `fn`; when it raises, `classify(exc)` returns either a `Transient` (retry after a
    backoff) or the exception to raise now. After the last attempt the transient's `final` error is
    raised (chained to the original). `on_retry(retry_number, original, delay)` is called before each wait."""
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - classify decides
            kind = classify(exc)
            if not isinstance(kind, Transient):
                raise kind from (exc if kind is not exc else None)
            if attempt == policy.attempts:
                raise kind.final from (exc if kind.final is not exc else None)
            wait = policy.delay(attempt, kind.retry_after)
            if on_retry is not None:
                on_retry(attempt, kind.original, wait)
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
