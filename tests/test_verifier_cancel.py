"""`cancel()`: a verifier stops at once. Its running workers are killed and nothing waits for them.
What they return is `infra_error` / `verifier_closed`, never a candidate's verdict. A later verifier
in the same process does not inherit the killed work as the task's failure. `amdkv gen` calls it on
SIGTERM (docs/gen.md).

Real CPU verifiers and real worker processes: the task's reference (a TritonBench-G style kernel
file, the benchmark's trusted code) sleeps, so the verification is surely in flight when it is
cancelled."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from slow_reference import COPY_KERNEL, SLEEP_S, slow_task, until, workers_labelled

from amdkv.config import VerifierConfig
from amdkv.verify.api import VERIFIER_CLOSED
from amdkv.verify.candidate import Candidate
from amdkv.verify.scheduler import MultiGpuScheduler
from amdkv.verify.verifier import Verifier


def _single(config: VerifierConfig):
    return Verifier(config)


def _scheduled(config: VerifierConfig):
    return MultiGpuScheduler(lambda i: Verifier(config), [0], config=config)


@pytest.mark.parametrize("open_verifier", [_single, _scheduled], ids=["verifier", "scheduler"])
def test_cancel_kills_running_work_and_returns_at_once(tmp_path: Path, monkeypatch, open_verifier) -> None:
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = slow_task(tmp_path)
    label = f"reference {task.id}"
    config = VerifierConfig(device="cpu", spares=0, timeout=60, reference_timeout=SLEEP_S * 2, verdict_cache=False)
    verifier = open_verifier(config)
    future = verifier.submit(task, Candidate(COPY_KERNEL))
    queued = verifier.submit(task, Candidate(COPY_KERNEL + "\n# another candidate\n"))
    assert until(lambda: workers_labelled(label), 60), "the reference worker never started"

    started = time.monotonic()
    verifier.cancel()
    assert time.monotonic() - started < 10, "cancel() waited for the work in flight"
    for fut in (future, queued):
        verdict = fut.result(timeout=30)
        assert (verdict.status, verdict.reason) == ("infra_error", VERIFIER_CLOSED), verdict.diagnostics
    assert until(lambda: not workers_labelled(label), 15), "the reference worker outlived cancel()"
    assert time.monotonic() - started < SLEEP_S / 2

    # a new verifier of this process runs the reference again (the killed run was not remembered as the
    # task's failure): here it runs into its own short reference timeout. (The second parameter then
    # needs a remembered failure to be keyed by the reference timeout: its 240 s is not this 3 s.)
    with Verifier("cpu", spares=0, timeout=60, reference_timeout=3, verdict_cache=False) as fresh:
        again = fresh.verify(task, Candidate(COPY_KERNEL))
    assert (again.status, again.reason) == ("unverifiable", "reference_timeout"), again.diagnostics
