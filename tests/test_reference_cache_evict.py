"""The reference cache under a size cap (`AMDKV_REFERENCE_CACHE_GIB`, reference_cache.evict): least
recently used entries go first, one a verification holds (`Leases`, in this process or another) never,
however recently or long ago it was used, and an evicted reference is recomputed to the same verdict.
Real files, real processes holding real locks, and a real verifier (cpu); ages are set with os.utime."""

from __future__ import annotations

import os
import time
from pathlib import Path

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Candidate, Verifier
from amdkv.verify.reference_cache import CaseFiles, Leases, evict, refs_root


def fake_entry(cache: Path, key: str, size: int, age_s: float) -> Path:
    entry = refs_root(cache) / key[:2] / key
    entry.mkdir(parents=True)
    (entry / "expected.pt").write_bytes(b"x" * size)
    (entry / "report.json").write_text("{}")
    used = time.time() - age_s
    os.utime(entry / "report.json", (used, used))
    return entry


def entries(cache: Path) -> set[str]:
    return {p.name for p in refs_root(cache).glob("*/*") if p.is_dir() and not p.name.startswith(".")}


def test_least_recently_used_go_first_and_a_recent_unheld_one_too(tmp_path):
    hour = 3600.0
    fake_entry(tmp_path, "aa0001", 1000, 3 * hour)
    fake_entry(tmp_path, "aa0002", 1000, 2 * hour)
    fake_entry(tmp_path, "bb0003", 1000, 1 * hour)
    fake_entry(tmp_path, "bb0004", 1000, 1.0)
    removed, left = evict(tmp_path, cap_bytes=2500)
    assert [k for k, _ in removed] == ["aa0001", "aa0002"]
    assert entries(tmp_path) == {"bb0003", "bb0004"} and left == 2 * 1000 + 2 * len("{}")
    removed, left = evict(tmp_path, cap_bytes=0)  # nobody holds them: a second-old entry goes too
    assert [k for k, _ in removed] == ["bb0003", "bb0004"] and entries(tmp_path) == set() and left == 0
    assert not list(refs_root(tmp_path).glob("*/*.lease")), "eviction leaves its lease files behind"


def test_an_entry_held_by_any_verification_is_never_evicted(tmp_path, lease_holder):
    old = 3 * 3600.0
    for key in ("aa0001", "aa0002", "bb0003"):
        fake_entry(tmp_path, key, 1000, old)
    mine = Leases()
    mine.take(CaseFiles("aa0002", tmp_path))
    other = lease_holder(tmp_path, "aa0001")
    removed, left = evict(tmp_path, cap_bytes=0)
    assert [k for k, _ in removed] == ["bb0003"], "a held entry was evicted, or the free one was not"
    assert entries(tmp_path) == {"aa0001", "aa0002"}
    mine.release()
    assert [k for k, _ in evict(tmp_path, cap_bytes=0)[0]] == ["aa0002"], "released, it must go"
    other.kill()  # a verifier that dies holds nothing: the kernel drops its lock
    other.wait()
    assert [k for k, _ in evict(tmp_path, cap_bytes=0)[0]] == ["aa0001"]


def test_a_lease_taken_after_an_eviction_holds_the_recomputed_entry(tmp_path):
    """The lease file is unlinked with its entry; a reader that opened the old file before that must
    not believe it holds the new one (Leases.take retries on the name's current file)."""
    from amdkv.verify import file_lock

    fake_entry(tmp_path, "aa0001", 1000, 3600.0)
    files = CaseFiles("aa0001", tmp_path)
    stale = os.open(files.lease, os.O_RDWR | os.O_CREAT)  # opened before the eviction, as a racing reader
    assert [k for k, _ in evict(tmp_path, cap_bytes=0)[0]] == ["aa0001"] and not files.lease.exists()
    assert not file_lock._still_named(stale, files.lease)
    os.close(stale)
    leases = Leases()
    leases.take(files)  # the recomputation's lease: a new file under the same name
    fake_entry(tmp_path, "aa0001", 1000, 3600.0)
    assert evict(tmp_path, cap_bytes=0)[0] == [] and entries(tmp_path) == {"aa0001"}
    leases.release()


def test_an_evicted_reference_is_recomputed_to_the_same_verdict(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(cache))
    relu, softmax = load_task(task_path("l1_relu")), load_task(task_path("l1_softmax"))
    relu_sol = Candidate(solution_path("l1_relu", "triton").read_text())
    with Verifier("cpu", jobs=1, trials=1, verdict_cache=False, compile_baseline=False,
                  reference_cache_gib=1e-9) as verifier:
        first = verifier.verify(relu, relu_sol)
        relu_entries = entries(cache)
        # seconds after l1_relu's verification: no longer held, so evicted however recent
        verifier.verify(softmax, Candidate(solution_path("l1_softmax", "triton").read_text()))
        assert relu_entries and not (relu_entries & entries(cache)), "l1_relu's references were not evicted"
        runs = verifier.reference_runs
        again = verifier.verify(relu, relu_sol)
        assert verifier.reference_runs == runs + 1  # recomputed, not read
    assert first.status == again.status == "ok", (first.diagnostics, again.diagnostics)
    assert relu_entries & entries(cache)


def test_no_walk_while_the_last_one_says_the_cache_is_far_under_its_cap(tmp_path, monkeypatch):
    """A walk of refs/ before every new reference cost seconds per task in a large cache; within a
    minute of the last walk and far under the cap, none is made; past the minute, or with the cap
    below the last total, it is."""
    from amdkv.verify import reference_cache

    fake_entry(tmp_path, "aa0001", 1000, 3600.0)
    walks = []
    real = reference_cache._walk_and_evict
    monkeypatch.setattr(reference_cache, "_walk_and_evict", lambda *a: walks.append(a) or real(*a))
    t0 = time.time()
    assert evict(tmp_path, cap_bytes=2**40, now=t0)[1] == 1000 + len("{}")
    assert len(walks) == 1
    _, estimate = evict(tmp_path, cap_bytes=2**40, now=t0 + 10)
    assert len(walks) == 1 and estimate >= 1000 + len("{}"), "a walk 10 s after the last, far under the cap"
    evict(tmp_path, cap_bytes=2**40, now=t0 + reference_cache.EVICT_REWALK_S + 1)
    assert len(walks) == 2, "no walk after the re-walk interval"
    removed, _ = evict(tmp_path, cap_bytes=500, now=t0 + reference_cache.EVICT_REWALK_S + 2)
    assert len(walks) == 3 and [k for k, _ in removed] == ["aa0001"], "a cap below the last total must walk"


def test_concurrent_verifications_under_a_zero_cap_all_judge_their_own_references(tmp_path, monkeypatch):
    """With a cap below any entry, every new reference computation evicts every entry nobody holds,
    while other verifications of this verifier are between their lookup and their judging. Each must
    still read the files it looked up: every verdict is `ok`, none an infra_error from a vanished file
    (without leases, an entry could go between a verification's lookup and its judge's read)."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(cache))
    ids = ["l1_relu", "l1_sum_lastdim", "l1_softmax", "l1_gelu_tanh"]
    with Verifier("cpu", jobs=2, trials=1, verdict_cache=False, compile_baseline=False,
                  reference_cache_gib=1e-9) as verifier:
        futures = [verifier.submit(load_task(task_path(t)), Candidate(solution_path(t, "triton").read_text()))
                   for t in ids * 2]
        verdicts = [f.result() for f in futures]
        runs = verifier.reference_runs
    assert [v.status for v in verdicts] == ["ok"] * len(ids) * 2, [(v.task_id, v.status, v.reason) for v in verdicts]
    assert runs >= len(ids), "each task's references were computed at least once"
    assert len(entries(cache)) < 2 * len(ids), "the zero cap evicted nothing"


def test_make_room_frees_what_is_short_oldest_first_and_never_a_held_entry(tmp_path):
    """reference_cache.make_room, disk admission's `reclaim`: least recently used entries nobody holds go
    until the shortfall is freed, and no more; a held entry stays however old."""
    from amdkv.verify.reference_cache import make_room

    hour = 3600.0
    fake_entry(tmp_path, "aa0001", 1000, 4 * hour)
    fake_entry(tmp_path, "aa0002", 1000, 3 * hour)
    fake_entry(tmp_path, "bb0003", 1000, 2 * hour)
    fake_entry(tmp_path, "bb0004", 1000, 1 * hour)
    held = Leases()
    held.take(CaseFiles("aa0001", tmp_path))
    removed = make_room(tmp_path, 1500)  # two entries' worth: the held oldest is passed over
    assert [k for k, _ in removed] == ["aa0002", "bb0003"], removed
    assert entries(tmp_path) == {"aa0001", "bb0004"}
    assert make_room(tmp_path, 0) == [] and make_room(tmp_path / "none", 10 ** 9) == []
    assert [k for k, _ in make_room(tmp_path, 10 ** 9)] == ["bb0004"], "all it can, when short of more"
    held.release()
