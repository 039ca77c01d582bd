"""Candidates wait for disk instead of failing for it (verify/disk_admission.py): one is admitted
when the free space, less what the running ones reserved and the floor, holds its need, or when it
would run alone. The free space is the one stand-in (filling this machine's disk is not a test):
`DiskAdmission(free=...)`; the threads, the verifier and its workers are real."""

from __future__ import annotations

import threading
import time

import pytest

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Candidate, Verifier
from amdkv.verify import disk_admission
from amdkv.verify.disk_admission import DiskAdmission


def _run_two(admission: DiskAdmission, folder: str, need: int, floor: int = 0) -> list[tuple[str, float, float]]:
    """Two candidates asking at once, each holding its admission 0.5 s: (name, start, end) of each."""
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def one(name: str) -> None:
        with admission.admitted(folder, need, floor):
            t0 = time.monotonic()
            time.sleep(0.5)
            with lock:
                spans.append((name, t0, time.monotonic()))

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return sorted(spans, key=lambda s: s[1])


def _overlap(spans) -> bool:
    return spans[1][1] < spans[0][2]


def _admission(tmp_path, free: int) -> DiskAdmission:
    """An admission with its own ledger folder (the default one is shared by every amdkv process of
    this user, other tests' verifiers included)."""
    return DiskAdmission(free=lambda _: free, root=tmp_path / "ledger")


def _reservations(tmp_path) -> list[str]:
    return [p.name for p in (tmp_path / "ledger").rglob("*") if p.is_file() and not p.name.startswith(".")]


def test_two_that_fit_together_run_together(tmp_path):
    assert _overlap(_run_two(_admission(tmp_path, 100), str(tmp_path), need=40))


def test_the_second_waits_while_the_two_would_not_fit(tmp_path):
    spans = _run_two(_admission(tmp_path, 100), str(tmp_path), need=60)
    assert len(spans) == 2 and not _overlap(spans), spans
    # the floor counts: 2 x 40 fits 100, not 100 less a floor of 30
    assert not _overlap(_run_two(_admission(tmp_path, 100), str(tmp_path), need=40, floor=30))


def test_one_alone_runs_whatever_its_need(tmp_path):
    admission = _admission(tmp_path, 10)
    t0 = time.monotonic()
    with admission.admitted(str(tmp_path), 10 ** 12, 0) as waited:
        assert waited < 0.5
        assert len(_reservations(tmp_path)) == 1
    assert time.monotonic() - t0 < 1.0
    assert not _reservations(tmp_path), "a reservation outlived its run"


def test_reclaim_is_asked_for_what_no_waiting_can_bring(tmp_path):
    """`reclaim` (the reference cache's unused entries) is asked, alone, for the whole shortfall; beside a
    running candidate, only for what even its reservation given back would not cover; and not again
    while the ledger is unchanged (a waiter would otherwise walk the cache every poll)."""
    disk = {"free": 100}
    asked: list[int] = []

    def reclaim(short: int) -> int:
        asked.append(short)
        disk["free"] += short
        return short

    admission = DiskAdmission(free=lambda _: disk["free"], root=tmp_path / "ledger")
    with admission.admitted(str(tmp_path), 150, 10, reclaim=reclaim):
        assert asked == [60]  # 150 + floor 10 - 100 free
        assert _reservations(tmp_path)
    asked.clear()
    disk["free"] = 100
    with admission.admitted(str(tmp_path), 30, 0):  # a running one: 30 reserved
        with pytest.raises(TimeoutError):  # 150 does not fit 100 - 30, and reclaim frees nothing here
            _admit_within(admission, tmp_path, need=150, reclaim=lambda s: asked.append(s) or 0, seconds=2.5)
    assert asked == [150 - 100 - 30], asked  # once over ~2 polls: what 100 free + 30 given back lacks
    asked.clear()
    with admission.admitted(str(tmp_path), 60, 0, reclaim=lambda s: asked.append(s) or 0):
        assert _reservations(tmp_path), "admitted without a reservation"
    assert asked == [], "reclaim asked while the need fits"


def _admit_within(admission: DiskAdmission, tmp_path, need: int, reclaim, seconds: float) -> None:
    """Ask for `need` in a thread; TimeoutError when not admitted within `seconds` (the thread is cancelled)."""
    stop = threading.Event()
    admitted = threading.Event()

    def ask() -> None:
        with admission.admitted(str(tmp_path), need, 0, cancelled=stop.is_set, reclaim=reclaim):
            admitted.set()

    thread = threading.Thread(target=ask)
    thread.start()
    ok = admitted.wait(seconds)
    stop.set()
    thread.join(timeout=10)
    if not ok:
        raise TimeoutError


def test_a_cancelled_verifier_stops_waiting(tmp_path):
    admission = _admission(tmp_path, 0)
    cancel = threading.Event()
    with admission.admitted(str(tmp_path), 1, 0):
        threading.Timer(0.3, cancel.set).start()
        t0 = time.monotonic()
        with admission.admitted(str(tmp_path), 1, 0, cancelled=cancel.is_set):
            assert time.monotonic() - t0 < 5


def test_a_verifier_waits_for_disk_and_both_verdicts_are_ok(tmp_path, monkeypatch):
    """Two candidates of a real verifier with 2 jobs, on a disk that holds one run's outputs at a time:
    the second waits (disk_wait_s) and both are `ok`, none an infra_error."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "_free", lambda _: 1)  # this process's one admission
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")  # not other tests' candidates
    task = load_task(task_path("l1_relu"))
    source = solution_path("l1_relu", "triton").read_text()
    with Verifier("cpu", jobs=2, verdict_cache=False, compile_baseline=False, min_free_disk_gib=0) as verifier:
        verifier.verify(task, Candidate(source))  # the references, computed once before the two
        futures = [verifier.submit(task, Candidate(source + f"\n# copy {i}\n")) for i in range(2)]
        verdicts = [f.result(timeout=300) for f in futures]
    assert [v.status for v in verdicts] == ["ok", "ok"], [(v.status, v.reason, v.diagnostics[:300]) for v in verdicts]
    waits = sorted(v.timings.get("disk_wait_s", 0.0) for v in verdicts)
    assert waits[0] == 0.0 and waits[1] > 0.0, waits


_HOLDER = """
import sys, time
from amdkv.verify.disk_admission import DiskAdmission
admission = DiskAdmission(free=lambda _: 100, root=sys.argv[1])
with admission.admitted(sys.argv[2], 60, 0) as waited:
    print("admitted", time.monotonic(), waited, flush=True)
    if sys.argv[3] == "die":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(1.0)
    print("released", time.monotonic(), flush=True)
"""


def _holder(tmp_path, how: str):
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "ledger"), str(tmp_path), how],
                            stdout=subprocess.PIPE, text=True)


def test_candidates_of_two_processes_wait_for_each_other(tmp_path):
    """The ledger is the machine's: two processes (two `amdkv eval`s, or Ray's one per GPU) whose two
    candidates do not fit the disk together run one after the other. Real processes, real locks; the
    free space (100 bytes, 60 needed each) is the stand-in."""
    procs = [_holder(tmp_path, "hold") for _ in range(2)]
    spans = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        stamps = {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}
        spans.append((stamps["admitted"], stamps["released"]))
    first, second = sorted(spans)
    assert second[0] >= first[1], spans  # the second admitted only after the first released
    assert not _reservations(tmp_path)


def test_a_killed_holders_reservation_goes_with_it(tmp_path):
    """A process killed while it holds leaves its file, but not its lock: the next admission sees no
    living holder, removes the file, and admits at once (a crash never keeps disk reserved)."""
    proc = _holder(tmp_path, "die")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -9 and out.startswith("admitted"), (proc.returncode, out)
    assert len(_reservations(tmp_path)) == 1  # left behind by the killed holder
    with _admission(tmp_path, 0).admitted(str(tmp_path), 60, 0) as waited:
        assert waited < 0.5 and len(_reservations(tmp_path)) == 1  # its own
    assert not _reservations(tmp_path)


def test_the_admission_benchmark_runs(tmp_path):
    """benchmarks/disk_admission.py at a tiny size: it runs with living holders and reports each row;
    the holders' reservations are gone afterwards."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "disk_admission.py"
    res = subprocess.run([sys.executable, str(script), "--holders", "0,3", "--repeat", "5", "--ledger",
                          str(tmp_path / "ledger"), "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout)["rows"]
    assert [r["holders"] for r in rows] == [0, 3] and all(r["median_us"] > 0 for r in rows)
    assert not _reservations(tmp_path)


def test_a_reference_that_says_its_size_waits_for_disk(tmp_path, monkeypatch):
    """A reference whose task says what it writes (`reference_trial_bytes`, sized on the meta device by
    the KernelBench loader) is admitted like a candidate: beside another living reservation, on a disk
    that holds neither, it waits for that one's release, then runs; the verdict is `ok`. The free space
    (1000 bytes) is the stand-in; the verifier, its workers and the ledger's locks are real."""
    import os
    from pathlib import Path

    from amdkv.tasks.suites import load_suite

    data = Path(__file__).resolve().parent / "data" / "external" / "kernelbench"
    task = load_suite(f"kernelbench:{data}?only=1_Tiny_add")[0]
    assert task.metadata["reference_trial_bytes"] == 888 + 444 + 8 * 111  # inputs, outputs, float64 golden
    assert disk_admission.reference_disk_need(task.metadata, 1, 3) == 3 * 2220
    assert disk_admission.reference_disk_need({}, 1, 3) == 0  # a task that does not say: not admitted
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(cache))
    monkeypatch.setattr(disk_admission.ADMISSION, "_free", lambda _: 1000)
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    ledger = disk_admission.ADMISSION._ledger(os.stat(cache).st_dev)
    other = ledger.reserve(10 ** 6)  # another process's candidate, still running
    released = threading.Event()

    def release() -> None:
        ledger.release(other)
        released.set()

    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference",
                  min_free_disk_gib=0) as verifier:
        threading.Timer(3.0, release).start()
        verdict = verifier.verify(task, Candidate(task.metadata["reference_candidate"]))
    assert released.is_set(), "the verification ended before the other reservation was released"
    assert verdict.status == "ok", (verdict.status, verdict.reason, verdict.diagnostics[:500])
    # the reference waited (not only the candidate after it, which then ran alone)
    assert verdict.timings["reference_s"] >= 2.5 and verdict.timings.get("disk_wait_s", 0.0) < 0.5, verdict.timings


def test_a_candidates_need_counts_its_checked_calls_where_the_expected_file_is_smaller():
    """At one trial, the expected-outputs file (outputs + goldens) can be smaller than what a correct
    candidate's checked calls write (the trial, the re-check, the call after timing): float64 or integer
    outputs, or a task without goldens (TritonBench-G, ROCmBench). The need is the larger of the two."""
    from amdkv.verify.worker_protocol import ReferenceCaseReport

    def report(output_bytes: int) -> ReferenceCaseReport:
        return ReferenceCaseReport(name="c", input_dtypes=["float64"], output_dtypes=["float64"], mutated=[],
                                   min_bytes=0, golden_available=False, golden_error=None, timing=None, seconds=0.1,
                                   gpu_need_bytes=0, output_bytes=output_bytes, phase_s={})

    refs = {"correct": {"seeds": [1000], "timed": False, "report": report(100)},
            "perf": {"seeds": [1000], "timed": True, "report": report(1000)}}
    # on a GPU: correct 1 trial + re-check = 2 calls; perf 1 + re-check + after timing = 3 calls
    assert disk_admission.checked_calls_bytes(refs, timed_calls=True) == 2 * 100 + 3 * 1000
    assert disk_admission.checked_calls_bytes(refs, timed_calls=False) == 2 * 100 + 2 * 1000  # cpu: never timed
    assert disk_admission.candidate_disk_need([100, 1000], 3200) == 3200  # the old rule said 1100
    assert disk_admission.candidate_disk_need([9000, None], 3200) == 9000
    assert disk_admission.candidate_disk_need([None], 0) == 0



def test_handed_copies_count_only_across_file_systems(tmp_path):
    """A file handed to a worker is a hard link on the same file system (no new space) and a copy on
    another (the references' cache on /dev/shm): only the copy is added to the candidate's need."""
    import os

    same = tmp_path / "inputs.pt"
    same.write_bytes(b"x" * 5000)
    worker_in = tmp_path / "in"
    worker_in.mkdir()
    assert disk_admission.handed_copy_bytes([str(same)], str(worker_in)) == 0
    shm = "/dev/shm"
    if not os.path.isdir(shm) or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("the copy half needs a second file system, and this machine has no /dev/shm apart from "
                    "the temp folder's (the hard-link half above ran)")
    import tempfile
    with tempfile.NamedTemporaryFile(dir=shm) as other:
        other.write(b"y" * 7000)
        other.flush()
        assert disk_admission.handed_copy_bytes([str(same), other.name], str(worker_in)) == 7000
    assert disk_admission.handed_copy_bytes([str(tmp_path / "gone.pt")], str(worker_in)) == 0


def test_a_folder_past_its_reservation_is_measured_and_hard_links_are_not_its_space(tmp_path, monkeypatch):
    import os

    root = tmp_path / "worker"
    root.mkdir()
    (root / "out.pt").write_bytes(os.urandom(3 * 2**20))
    cached = tmp_path / "cache_inputs.pt"
    cached.write_bytes(os.urandom(4 * 2**20))
    os.link(cached, root / "inputs.pt")  # handed by a hard link: the cache's space, not the folder's
    written = disk_admission.folder_bytes(str(root))
    assert 3 * 2**20 <= written < 4 * 2**20
    assert disk_admission.over_reservation(str(root), 2**20) == 0  # a need this small is not checked
    monkeypatch.setattr(disk_admission, "CHECK_WRITTEN_ABOVE_BYTES", 0)
    monkeypatch.setattr(disk_admission, "OVER_RESERVATION_SLACK_BYTES", 0)
    assert disk_admission.over_reservation(str(root), 2**20) == written - 2**20
    assert disk_admission.over_reservation(str(root), 8 * 2**20) == 0


def test_a_verdict_says_when_its_candidate_wrote_past_its_reservation(tmp_path, monkeypatch):
    """The wiring in the verifier, with a real worker and its real folder: an estimate that falls short
    (the stand-in: candidate_disk_need answering 0, with no slack and no lower bound) leaves the
    candidate's outputs past its reservation, and the verdict's timings say by how much; the verdict
    itself does not change. With the real estimate the same candidate is within it."""
    import amdkv.verify.verifier as verifier_module

    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    task = load_task(task_path("l1_relu"))
    source = solution_path("l1_relu", "triton").read_text()
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, min_free_disk_gib=0) as verifier:
        plain = verifier.verify(task, Candidate(source))
        monkeypatch.setattr(disk_admission, "CHECK_WRITTEN_ABOVE_BYTES", 0)
        monkeypatch.setattr(disk_admission, "OVER_RESERVATION_SLACK_BYTES", 0)
        within = verifier.verify(task, Candidate(source + "\n# within\n"))
        monkeypatch.setattr(verifier_module, "candidate_disk_need", lambda sizes, calls=0: 0)
        short = verifier.verify(task, Candidate(source + "\n# short\n"))
    assert plain.status == within.status == short.status == "ok"
    assert "disk_over_reservation_mib" not in plain.timings and "disk_over_reservation_mib" not in within.timings
    assert short.timings.get("disk_over_reservation_mib", 0) > 0.1, short.timings  # its outputs file


def _old_entries_crowd_the_disk(tmp_path, monkeypatch, min_free_disk_gib: float, crowd):
    """A real verifier on `cpu` verifies l1_relu (its references stay cached: no cap set), then
    `crowd(gone)` installs the stand-in of a disk with no room until `gone()` (l1_relu's entries are no
    longer there), then it verifies l1_softmax. Returns (first verdict, second verdict, l1_relu's entries,
    the entries at the end)."""
    from amdkv.verify.reference_cache import refs_root

    cache = tmp_path / "cache"
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(cache))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")

    def entries() -> set[str]:
        return {p.name for p in refs_root(cache).glob("*/*") if p.is_dir() and not p.name.startswith(".")}

    with Verifier("cpu", jobs=1, trials=1, verdict_cache=False, compile_baseline=False,
                  min_free_disk_gib=min_free_disk_gib) as verifier:
        first = verifier.verify(load_task(task_path("l1_relu")), Candidate(solution_path("l1_relu", "triton").read_text()))
        old = entries()
        crowd(lambda: not (old & entries()))
        second = verifier.verify(load_task(task_path("l1_softmax")),
                                 Candidate(solution_path("l1_softmax", "triton").read_text()))
    return first, second, old, entries()


def test_the_reference_cache_gives_up_old_entries_for_a_candidate_that_does_not_fit(tmp_path, monkeypatch):
    """l1_softmax's candidate runs alone on a disk with no room while l1_relu's references are cached (the
    stand-in: the admission's free space 0 until they are gone). Its admission removes them, not its own,
    and says so in the verdict (`disk_reclaimed_mib`); the verdict is `ok`. On the H100 (2026-12-06)
    KernelBench's 38_L1Norm_ met a full disk this way beside 15 GiB of earlier problems' references."""
    first, second, old, left = _old_entries_crowd_the_disk(
        tmp_path, monkeypatch, 0,
        lambda gone: monkeypatch.setattr(disk_admission.ADMISSION, "_free", lambda _: 10 ** 12 if gone() else 0))
    assert first.status == second.status == "ok", (second.status, second.reason, second.diagnostics[:500])
    assert old and not (old & left) and left, "the old entries stay, or the candidate's own went"
    assert second.timings.get("disk_reclaimed_mib", 0) > 0, second.timings
    assert "disk_reclaimed_mib" not in first.timings


def test_a_nearly_full_disk_gives_up_unused_references_before_a_verification(tmp_path, monkeypatch):
    """The free-disk guard at a verification's start (min_free_disk_gib) first removes the reference
    cache's unused entries, then looks again: the verdict is `ok`, not `infra_error`/disk nearly full.
    The stand-in: shutil.disk_usage reports 0 bytes free while l1_relu's old entries are there (this
    process only: the workers are real subprocesses and see the real disk)."""
    import shutil
    from collections import namedtuple

    real, usage = shutil.disk_usage, namedtuple("usage", "total used free")
    _, verdict, old, left = _old_entries_crowd_the_disk(
        tmp_path, monkeypatch, 1,
        lambda gone: monkeypatch.setattr(shutil, "disk_usage",
                                         lambda path: real(path) if gone() else usage(10 ** 12, 10 ** 12, 0)))
    assert verdict.status == "ok", (verdict.status, verdict.reason, verdict.diagnostics[:500])
    assert old and not (old & left)
