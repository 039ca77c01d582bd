"""The adversarial candidate set: wrong, cheating and correct-but-unusual Triton candidates run
through the real verifier on the CPU platform (Triton interpreter).

Each entry of tests/data/adversarial/manifest.json names a candidate file, the task it targets
(a bundled task id, or one of the small test tasks in tests/data/adversarial/tasks/), the status
it must get and, where stable, the reason. One Verifier (one warm spare at a time) is shared by
the whole module; the infinite-loop candidate gets its own short-timeout Verifier.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the adversarial set is Triton candidates: install triton==3.6.0 (make test does)")

from amdkv.verify import Verifier  # noqa: E402
from amdkv.verify.verdict import STATUSES, Verdict  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "adversarial"
TASK_DIRS = (DATA / "tasks", ROOT / "amdkv" / "tasks" / "builtin" / "general",
             ROOT / "amdkv" / "tasks" / "builtin" / "rocm")
MANIFEST = json.loads((DATA / "manifest.json").read_text())
# Generous for a loaded 2-core CI machine: a correct candidate here needs a few seconds.
TIMEOUT_S = 120.0
# The infinite loop must end as `timeout` quickly; a correct relu finishes far inside this.
SHORT_TIMEOUT_S = 20.0
TIMEOUT_CASES = {e["candidate"] for e in MANIFEST if e["status"] == "timeout"}


def task_path(task_id: str) -> Path:
    for folder in TASK_DIRS:
        path = folder / f"{task_id}.py"
        if path.is_file():
            return path
    raise FileNotFoundError(f"task {task_id!r} is in none of {[str(d) for d in TASK_DIRS]}")


@pytest.fixture(scope="module")
def verifier():
    with Verifier("cpu", timeout=TIMEOUT_S, spares=1) as v:
        yield v


def _check(verdict, entry) -> None:
    detail = (f"{entry['candidate']} on {entry['task']}: expected {entry['status']}/{entry['reason']}, "
              f"got {verdict.status}/{verdict.reason}\n{verdict.diagnostics[-2000:]}")
    assert verdict.status == entry["status"], detail
    if entry["reason"] is not None:
        assert verdict.reason == entry["reason"], detail
    if entry["status"] == "ok":
        assert verdict.correct is True and verdict.interpreter_verified, detail
    elif entry["status"] in ("mismatch", "hack_detected", "compile_error", "runtime_error", "timeout"):
        assert verdict.correct is False, detail
    # the invariants hold on every verdict the verifier returns (enforce_invariants changes nothing)
    before = (verdict.correct, verdict.compiled, verdict.interpreter_verified)
    assert (lambda v: (v.correct, v.compiled, v.interpreter_verified))(
        Verdict.from_dict(verdict.to_dict()).enforce_invariants()) == before, detail


def _assert_alive(verifier, after_entry) -> None:
    """The harness survives the candidate: the shared Verifier still judges a correct candidate."""
    verdict = verifier.verify(task_path("l1_relu"), DATA / "ok_closure_kernel.py")
    assert verdict.status == "ok", (f"after {after_entry['candidate']}: {verdict.status}/{verdict.reason}\n"
                                    f"{verdict.diagnostics[-2000:]}")


def test_manifest_is_well_formed():
    names = [e["candidate"] for e in MANIFEST]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in DATA.glob("*.py")}
    assert set(names) == on_disk, "every candidate file has exactly one manifest entry"
    gpu_keys = {"status_gpu", "reason_gpu", "why_gpu"}
    for e in MANIFEST:
        assert {"candidate", "task", "status", "reason", "why"} <= set(e)
        # a documented platform difference names all three GPU fields, or none; a known GPU gap
        # (the GPU accepts what the CPU rejects) names only its reason, `gap_gpu`
        assert set(e) - {"candidate", "task", "status", "reason", "why"} in (set(), gpu_keys, {"gap_gpu"}), e
        gpu_statuses = e.get("status_gpu", "ok")
        assert e["status"] in STATUSES
        assert set(gpu_statuses if isinstance(gpu_statuses, list) else [gpu_statuses]) <= set(STATUSES)
        task_path(e["task"])
    wrong = [e for e in MANIFEST if e["status"] != "ok"]
    right = [e for e in MANIFEST if e["status"] == "ok"]
    assert len(wrong) >= 24 and len(right) >= 4


@pytest.mark.slow
@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["candidate"] not in TIMEOUT_CASES],
                         ids=lambda e: e["candidate"][:-3])
def test_candidate(verifier, entry):
    verdict = verifier.verify(task_path(entry["task"]), DATA / entry["candidate"])
    _check(verdict, entry)
    if entry["status"] == "runtime_error":
        # exits, signals and segfaults kill only the candidate's own worker
        _assert_alive(verifier, entry)


@pytest.mark.slow
@pytest.mark.parametrize("entry", [e for e in MANIFEST if e["candidate"] in TIMEOUT_CASES],
                         ids=lambda e: e["candidate"][:-3])
def test_timeout_candidate(verifier, entry):
    t0 = time.monotonic()
    with Verifier("cpu", timeout=SHORT_TIMEOUT_S, spares=0) as short:
        verdict = short.verify(task_path(entry["task"]), DATA / entry["candidate"])
    elapsed = time.monotonic() - t0
    _check(verdict, entry)
    # the worker's process group was killed at the limit, not left running to the end
    assert elapsed < SHORT_TIMEOUT_S + 60, elapsed
    # and the shared harness is unaffected
    _assert_alive(verifier, entry)
