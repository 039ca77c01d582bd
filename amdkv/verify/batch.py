"""Verify many (task, candidate) pairs with one Verifier, a few at a time, with progress.

Concurrency is by threads in this process driving separate worker processes; the pool keeps
spares warm so each candidate finds torch already imported.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from amdkv.errors import AmdkvError
from amdkv.tasks.types import Task
from amdkv.verify.verdict import INFRA_ERROR, Verdict
from amdkv.verify.verifier import Verifier


def verify_many(verifier: Verifier, pairs: Iterable[tuple[Task, str]], *, jobs: int = 1,
                on_result: Callable[[Task, str, Verdict], None] | None = None) -> list[Verdict]:
    """Verdicts in input order. A harness failure on one pair becomes that pair's infra_error.

    `verifier` may also be a `scheduler.MultiGpuScheduler` (several GPUs): it then spreads the
    pairs over its GPUs with its own threads and `jobs` is already part of it.
    """
    pairs = list(pairs)
    if hasattr(verifier, "verify_many"):
        return verifier.verify_many(pairs, on_result=on_result)

    def one(pair: tuple[Task, str]) -> Verdict:
        task, cand = pair
        try:
            verdict = verifier.verify(task, cand)
        except AmdkvError as exc:
            verdict = Verdict(status=INFRA_ERROR, reason="harness_failure", task_id=task.id,
                              platform=verifier.platform.name, diagnostics=str(exc))
        if on_result:
            on_result(task, cand, verdict)
        return verdict

    if jobs <= 1:
        return [one(p) for p in pairs]
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(one, pairs))
