"""A worker killed by SIGKILL while the host's out-of-memory killer ran is `infra_error`/`host_oom`
(the machine's failure), not the candidate's `runtime_error`/`crashed:SIGKILL` (verify/host_oom.py).

The kernel's OOM killer is a boundary these tests cannot reach without starving the machine: the
worker pool's reading of its counter (/proc/vmstat `oom_kill`, `Spare.run`) is replaced by a counter
that rises during the run. The worker and its SIGKILL are real."""

from __future__ import annotations

import itertools
import os
import signal
import threading

import pytest
from slow_reference import until, workers_labelled

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Candidate, Verifier
from amdkv.verify.host_oom import killed_by_host_oom, oom_kills


def test_the_counter_is_read_from_vmstat(tmp_path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 100\noom_kill 7\npgfault 3\n")
    assert oom_kills(str(vmstat)) == 7
    vmstat.write_text("nr_free_pages 100\n")
    assert oom_kills(str(vmstat)) is None  # a kernel before 4.13
    assert oom_kills(str(tmp_path / "missing")) is None
    if os.path.exists("/proc/vmstat"):
        assert isinstance(oom_kills(), int), "this Linux has no oom_kill line in /proc/vmstat"


def test_only_a_sigkill_while_the_count_rose_is_the_hosts():
    assert killed_by_host_oom("SIGKILL", 3, 4)
    for sig, before, after in (("SIGKILL", 3, 3), ("SIGSEGV", 3, 4), (None, 3, 4), ("SIGKILL", None, 4),
                               ("SIGKILL", 3, None)):
        assert killed_by_host_oom(sig, before, after) is None


# BLOCK=1: one interpreted program per element, so the worker is surely still running when it is killed
SLOW_RELU = ("BLOCK = 1024\n", "BLOCK = 1\n")


@pytest.mark.parametrize("host_killed", [True, False], ids=["oom-killer-ran", "no-oom-kill"])
def test_a_worker_killed_during_an_oom_kill_is_infra_error(tmp_path, monkeypatch, host_killed):
    from amdkv.verify import pool

    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    counts = itertools.count(100) if host_killed else itertools.repeat(100)
    monkeypatch.setattr(pool, "oom_kills", lambda: next(counts))
    task = load_task(task_path("l1_relu"))
    source = solution_path("l1_relu", "triton").read_text()
    assert SLOW_RELU[0] in source
    label = f"candidate {task.id}"
    killed: list[int] = []

    def kill_the_worker() -> None:
        if until(lambda: workers_labelled(label, os.getpid()), 120):
            for pid in workers_labelled(label, os.getpid()):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, timeout=120) as verifier:
        killer = threading.Thread(target=kill_the_worker)
        killer.start()
        verdict = verifier.verify(task, Candidate(source.replace(*SLOW_RELU)))
        killer.join()
    assert killed, "the candidate's worker was never seen"
    if host_killed:
        assert (verdict.status, verdict.reason) == ("infra_error", "host_oom"), verdict.diagnostics
        assert "out-of-memory killer" in verdict.diagnostics
    else:
        assert (verdict.status, verdict.reason) == ("runtime_error", "crashed:SIGKILL"), verdict.diagnostics


def test_a_reference_killed_during_an_oom_kill_runs_again_alone_then_is_infra_error(tmp_path, monkeypatch):
    """A reference worker SIGKILLed while the OOM killer ran is run again alone (not retried beside the
    others, not remembered as the task's failure); killed so again, the verdict is infra_error/host_oom."""
    from slow_reference import COPY_KERNEL, slow_task

    from amdkv.verify import pool

    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    counts = itertools.count(100)
    monkeypatch.setattr(pool, "oom_kills", lambda: next(counts))
    task = slow_task(tmp_path)  # its reference sleeps: surely running when it is killed
    label = f"reference {task.id}"
    killed: list[int] = []
    stop = threading.Event()

    def kill_every_reference_worker() -> None:
        while not stop.is_set():
            for pid in workers_labelled(label, os.getpid()):  # this test's only
                if pid not in killed:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            stop.wait(0.1)

    killer = threading.Thread(target=kill_every_reference_worker)
    killer.start()
    try:
        with Verifier("cpu", jobs=1, verdict_cache=False, timeout=60, reference_timeout=300) as verifier:
            verdict = verifier.verify(task, Candidate(COPY_KERNEL))
    finally:
        stop.set()
        killer.join()
    assert (verdict.status, verdict.reason) == ("infra_error", "host_oom"), verdict.diagnostics
    assert "run alone" in verdict.diagnostics
    assert len(killed) == 2, f"the reference ran {len(killed)} time(s): once beside others, once alone, was expected"
