"""`amdkv cache info / prune` on real cache folders: sizes per part, and pruning that keeps what a
verification in another (real) process holds. A real verifier (cpu) fills a cache, a prune empties
it, and the next verification recomputes its references to the same verdict."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from amdkv.cli import main
from amdkv.verify.reference_cache import refs_root


def _entry(cache: Path, key: str, size: int) -> None:
    entry = refs_root(cache) / key[:2] / key
    entry.mkdir(parents=True)
    (entry / "expected.pt").write_bytes(b"x" * size)
    (entry / "report.json").write_text("{}")


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args))
    return res.exit_code, res.output


def test_info_sizes_each_part_and_counts_reference_entries(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _entry(cache, "aa0001", 3000)
    _entry(cache, "bb0002", 1000)
    (cache / "verdicts").mkdir()
    (cache / "verdicts" / "v.json").write_text("{}")
    (cache / "mine").mkdir()
    code, out = _run("cache", "info", "--cache-dir", str(cache), "--json")
    assert code == 0, out
    info = json.loads(out)
    parts = {p["name"]: p for p in info["parts"]}
    assert parts["refs"]["bytes"] == 4000 + 2 * len("{}") and parts["refs"]["files"] == 4
    assert info["reference_entries"] == 2 and parts["verdicts"]["bytes"] == 2
    assert parts["mine"]["about"] == "not a part amdkv knows" and info["free_bytes"] > 0
    assert info["total_bytes"] == sum(p["bytes"] for p in info["parts"])
    code, out = _run("cache", "info", "--cache-dir", str(cache))
    assert code == 0 and "refs/" in out and "2 entries" in out
    code, out = _run("cache", "info", "--cache-dir", str(tmp_path / "none"), "--json")
    assert code == 0 and json.loads(out)["parts"] == [] and json.loads(out)["free_bytes"] is None


def test_prune_keeps_what_a_running_verification_holds(tmp_path: Path, lease_holder) -> None:
    cache = tmp_path / "cache"
    for key in ("aa0001", "aa0002", "bb0003"):
        _entry(cache, key, 1000)
    lease_holder(cache, "aa0002")  # a verification in another process is using this one
    code, out = _run("cache", "prune", "--refs-gib", "0", "--cache-dir", str(cache), "--json")
    assert code == 0, out
    res = json.loads(out)
    assert sorted(r["key"] for r in res["removed"]) == ["aa0001", "bb0003"] and res["entries_left"] == 1
    assert (refs_root(cache) / "aa" / "aa0002" / "expected.pt").is_file()
    code, out = _run("cache", "prune", "--refs-gib", "0", "--cache-dir", str(cache))
    assert code == 0 and "removed 0" in out and "in use by running verifications" in out
    code, out = _run("cache", "prune", "--refs-gib", "-1", "--cache-dir", str(cache))
    assert code == 2 and "--refs-gib" in out


def test_a_pruned_reference_is_recomputed_to_the_same_verdict(tmp_path: Path, monkeypatch) -> None:
    from amdkv.tasks.builtin import solution_path, task_path
    from amdkv.tasks.loader import load_task
    from amdkv.verify import Candidate, Verifier

    cache = tmp_path / "cache"
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(cache))
    task = load_task(task_path("l1_relu"))
    sol = Candidate(solution_path("l1_relu", "triton").read_text())
    with Verifier("cpu", jobs=1, trials=1, verdict_cache=False, compile_baseline=False) as verifier:
        first = verifier.verify(task, sol)
        code, out = _run("cache", "prune", "--refs-gib", "0", "--json")  # AMDKV_CACHE_DIR's cache
        assert code == 0 and json.loads(out)["removed"] and json.loads(out)["entries_left"] == 0, out
        runs = verifier.reference_runs
        again = verifier.verify(task, sol)
        assert verifier.reference_runs == runs + 1  # recomputed, not read
    assert first.status == again.status == "ok", (first.diagnostics, again.diagnostics)
