"""The multi-GPU scheduler's logic on CPU: fake verifiers and health checks (dependency injection)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from amdkv.config import VerifierConfig
from amdkv.tasks.types import Task
from amdkv.verify import scheduler as sched
from amdkv.verify.candidate import Candidate
from amdkv.verify.scheduler import HealthResult, MultiGpuScheduler, gpu_suspect
from amdkv.verify.verdict import INFRA_ERROR, MISMATCH, OK, RUNTIME_ERROR, TIMEOUT, Verdict


class FakeVerifier:
    """Calls `behaviour(gpu, candidate)` -> Verdict; records what ran where and when."""

    def __init__(self, gpu: int, behaviour, log: list, delay: float = 0.005) -> None:
        self.gpu = gpu
        self.behaviour = behaviour
        self.log = log
        self.delay = delay
        self.platform = SimpleNamespace(name="cuda", device=f"cuda:{gpu}")
        self.closed = False

    def verify_now(self, task, candidate: Candidate) -> Verdict:
        t0 = time.monotonic()
        time.sleep(self.delay)
        v = self.behaviour(self.gpu, candidate.source)
        self.log.append((self.gpu, candidate.source, t0, time.monotonic()))
        return v

    def close(self) -> None:
        self.closed = True


def ok(gpu, cand):
    return Verdict(status=OK, task_id="t")


def crash_on(bad_cands, reason="crashed:SIGSEGV", status=RUNTIME_ERROR, only_gpu=None):
    def behaviour(gpu, cand):
        if cand in bad_cands and (only_gpu is None or gpu == only_gpu):
            return Verdict(status=status, reason=reason, task_id="t", diagnostics="the candidate's process died")
        return Verdict(status=OK, task_id="t")
    return behaviour


def make(n_gpus, behaviour, *, jobs=1, health=None, delay=0.005, **kw):
    log: list = []
    verifiers = {}

    def factory(i):
        verifiers[i] = FakeVerifier(i, behaviour, log, delay)
        return verifiers[i]

    checks: list = []

    def default_health(i):
        checks.append(i)
        return HealthResult(True, "ok", 0.0)

    # verdict cache off: these tests re-run the same candidate names with other behaviours
    s = MultiGpuScheduler(factory, list(range(n_gpus)), config=VerifierConfig(verdict_cache=False), jobs_per_gpu=jobs,
                          health_check=health or default_health, **kw)
    return s, log, verifiers, checks


def pairs(n, prefix="c"):
    return [(Task(id=f"task{i}", path="/none", source=f"task{i}"), Candidate(source=f"{prefix}{i}")) for i in range(n)]


def test_distributes_over_gpus_and_keeps_order():
    s, log, verifiers, checks = make(2, ok, jobs=2, delay=0.02)
    with s:
        out = s.verify_many(pairs(16))
    assert [v.status for v in out] == [OK] * 16
    used = {g for g, *_ in log}
    assert used == {0, 1}
    assert all(v.env["scheduler"]["attempts"] == 1 for v in out)
    assert checks == []  # no suspect verdict, no health check
    assert all(v.closed for v in verifiers.values())


def test_concurrency_per_gpu_is_bounded_by_jobs():
    s, log, _, _ = make(2, ok, jobs=2, delay=0.03)
    with s:
        s.verify_many(pairs(12))
    for gpu in (0, 1):
        spans = [(a, b) for g, _, a, b in log if g == gpu]
        for a, _ in spans:
            overlapping = sum(1 for x, y in spans if x <= a < y)
            assert overlapping <= 2


def test_suspect_verdict_with_healthy_gpu_stands():
    s, log, _, checks = make(1, crash_on({"c3"}))
    with s:
        out = s.verify_many(pairs(6))
    assert out[3].status == RUNTIME_ERROR and out[3].reason == "crashed:SIGSEGV"
    assert checks == [0]
    assert [v.status for i, v in enumerate(out) if i != 3] == [OK] * 5
    assert s.quarantined() == []


def test_failed_health_check_quarantines_and_retries_elsewhere():
    # GPU 0 is broken: whatever runs there crashes (and is fine on GPU 1)
    def behaviour(gpu, cand):
        if gpu == 0:
            return Verdict(status=RUNTIME_ERROR, reason="exception:AcceleratorError", task_id="t",
                           diagnostics="AcceleratorError: CUDA error: an illegal memory access was encountered")
        return Verdict(status=OK, task_id="t")

    def health(i):
        return HealthResult(i != 0, "HEALTH ok=False" if i == 0 else "ok", 0.0)

    s, log, _, _ = make(2, behaviour, health=health, delay=0.01)
    with s:
        out = s.verify_many(pairs(10))
    assert s.quarantined() == [0]
    assert all(v.status == OK for v in out)
    on_gpu0 = [c for g, c, *_ in log if g == 0]
    assert len(on_gpu0) == 1  # one crash, then quarantine: nothing else started there
    retried = out[int(on_gpu0[0][1:])]
    hist = retried.env["scheduler"]["history"]
    assert [h["gpu"] for h in hist] == [0, 1] and hist[0]["retried"]
    assert s.stats()["0"]["quarantined"] and s.stats()["0"]["health_checks"][0]["ok"] is False


def test_single_gpu_quarantined_later_candidates_are_infra_error():
    s, log, _, _ = make(1, crash_on({"c1"}), health=lambda i: HealthResult(False, "dead", 0.0))
    with s:
        out = s.verify_many(pairs(5))
    assert out[0].status == OK
    assert out[1].status == RUNTIME_ERROR  # nowhere to retry: the candidate's own verdict stays
    assert "quarantined" in out[1].diagnostics
    assert [v.status for v in out[2:]] == [INFRA_ERROR] * 3
    assert all(v.reason == "gpu_quarantined" for v in out[2:])
    assert {c for _, c, *_ in log} == {"c0", "c1"}


def test_retries_are_bounded():
    # c0 crashes everywhere and every GPU fails its check afterwards
    s, log, _, _ = make(3, crash_on({"c0"}), health=lambda i: HealthResult(False, "dead", 0.0), max_attempts=2)
    with s:
        out = s.verify_many(pairs(1))
    assert out[0].status == RUNTIME_ERROR
    assert out[0].env["scheduler"]["attempts"] == 2
    assert len(s.quarantined()) == 2


def test_no_retry_of_trigger_when_disabled():
    behaviour = crash_on({"c0"}, only_gpu=0)
    s, log, _, _ = make(2, behaviour, health=lambda i: HealthResult(i != 0, "", 0.0), retry_trigger=False,
                        delay=0.0)
    with s:
        out = s.verify_many(pairs(1))
    # whichever GPU took it: on GPU 0 it stays a runtime_error, on GPU 1 it is ok
    hist = out[0].env["scheduler"]["history"]
    assert len(hist) == 1
    assert out[0].status == (RUNTIME_ERROR if hist[0]["gpu"] == 0 else OK)


def test_health_check_gates_the_next_start_on_that_gpu():
    events: list = []
    lock = threading.Lock()

    def health(i):
        with lock:
            events.append(("check_start", time.monotonic()))
        time.sleep(0.2)
        with lock:
            events.append(("check_end", time.monotonic()))
        return HealthResult(True, "ok", 0.2)

    s, log, _, _ = make(1, crash_on({"c0"}, status=TIMEOUT, reason="wall_timeout"), jobs=1, health=health,
                        delay=0.01)
    with s:
        out = s.verify_many(pairs(4))
    assert out[0].status == TIMEOUT
    check_end = next(t for e, t in events if e == "check_end")
    later = [a for g, c, a, b in log if c != "c0"]
    assert later and min(later) >= check_end


def test_infra_error_on_quarantined_gpu_is_retried():
    def behaviour(gpu, cand):
        if gpu == 0:
            return Verdict(status=INFRA_ERROR, reason="harness_failure", task_id="t")
        return Verdict(status=OK, task_id="t")

    s, _, _, _ = make(2, behaviour, health=lambda i: HealthResult(i != 0, "", 0.0), retry_trigger=False)
    with s:
        out = s.verify_many(pairs(6))
    assert all(v.status == OK for v in out)
    assert s.quarantined() == [0]


def test_exceptions_in_verify_become_infra_error():
    def behaviour(gpu, cand):
        raise RuntimeError("bug")

    s, _, _, checks = make(1, behaviour, health=lambda i: HealthResult(True, "", 0.0))
    with s:
        out = s.verify_many(pairs(2))
    assert all(v.status == INFRA_ERROR and v.reason == "harness_failure" for v in out)


def test_verify_many_calls_back_with_the_arguments_given():
    s, _, _, _ = make(2, ok, jobs=1)
    seen = []
    given = pairs(5)
    with s:
        out = s.verify_many(given, on_result=lambda t, c, v: seen.append(c))
    assert len(out) == 5 and sorted(c.source for c in seen) == sorted(f"c{i}" for i in range(5))
    assert all(any(c is g for _, g in given) for c in seen)  # the very objects the caller passed


@pytest.mark.parametrize("status,reason,diag,want", [
    (TIMEOUT, "wall_timeout", "", "timeout"),
    (RUNTIME_ERROR, "crashed:SIGSEGV", "", "process_died:crashed:SIGSEGV"),
    (RUNTIME_ERROR, "exception:AcceleratorError", "AcceleratorError: CUDA error: an illegal memory access was "
     "encountered", "gpu_error"),
    (RUNTIME_ERROR, "exception:RuntimeError", "RuntimeError: HIP error: hipErrorIllegalAddress", "gpu_error"),
    (RUNTIME_ERROR, "exception:ValueError", "ValueError: bad shape", None),
    (RUNTIME_ERROR, "oom", "torch.OutOfMemoryError: CUDA out of memory", None),
    (MISMATCH, "value_mismatch", "CUDA error", None),
    (OK, None, "", None),
    (INFRA_ERROR, "harness_failure", "", "infra_error"),
])
def test_gpu_suspect(status, reason, diag, want):
    assert gpu_suspect(Verdict(status=status, reason=reason, diagnostics=diag)) == want


def test_oom_is_not_a_gpu_fault():
    # "CUDA out of memory" contains "cuda" but not "cuda error": the candidate's own fault
    v = Verdict(status=RUNTIME_ERROR, reason="oom", diagnostics="OutOfMemoryError: CUDA out of memory. Tried")
    assert gpu_suspect(v) is None


def test_subprocess_health_check_fails_cleanly_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: this test needs the health check's failure path, which only a machine without a GPU takes")
    res = sched.subprocess_health_check(0, timeout=120)
    assert not res.ok and res.detail


def test_open_verifier_on_cpu_is_a_plain_verifier():
    from amdkv.verify.verifier import Verifier

    v = sched.open_verifier("cpu", spares=0)
    try:
        assert isinstance(v, Verifier) and v.platform.name == "cpu"
    finally:
        v.close()


def test_deadline_leaves_unstarted_pairs_out():
    s, log, _, _ = make(1, ok, jobs=1, delay=0.05)
    with s:
        out = s.verify_many(pairs(20), deadline=time.monotonic() + 0.12)
    done = [v for v in out if v.status == OK]
    skipped = [v for v in out if v.reason == "not_started_before_deadline"]
    assert 1 <= len(done) <= 5 and len(done) + len(skipped) == 20
