"""Every bundled Triton reference solution is `ok` on the CPU interpreter (or `unverifiable`
with a reason the interpreter really cannot judge, e.g. bf16)."""

from __future__ import annotations

import pytest

from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_builtin
from amdkv.verify import Verifier

INTERPRETER_LIMITS = {"bf16_on_interpreter", "libdevice_on_interpreter", "inline_asm_on_interpreter"}
TASKS = load_builtin()


@pytest.fixture(scope="module")
def verdicts() -> dict:
    pairs = [(t, str(solution_path(t.id))) for t in TASKS]
    # archs: every solution's captured kernels are also compiled for MI300X (gfx942).
    with Verifier("cpu", jobs=2, spares=2, timeout=240, archs=("gfx942",)) as verifier:
        results = verifier.verify_many(pairs)
    return {t.id: v for t, v in zip(TASKS, results)}


@pytest.mark.parametrize("task_id", [t.id for t in TASKS])
def test_reference_solution_verifies_on_cpu(verdicts: dict, task_id: str) -> None:
    v = verdicts[task_id]
    assert v.platform == "cpu"
    if v.status == "unverifiable":
        assert v.reason in INTERPRETER_LIMITS, f"{task_id}: unverifiable for {v.reason}: {v.diagnostics[-800:]}"
        return
    assert v.status == "ok", f"{task_id}: {v.status} ({v.reason})\n{v.diagnostics[-1500:]}"
    assert v.correct is True and v.interpreter_verified is True
    assert v.cases and all(c.trials >= 1 for c in v.cases)
    assert v.env["suite_version"] and v.env["task_source_hash"]


@pytest.mark.parametrize("task_id", [t.id for t in TASKS])
def test_reference_solution_compiles_for_gfx942(verdicts: dict, task_id: str) -> None:
    """Resources come from a real AMD compile of the kernels captured while the solution ran."""
    v = verdicts[task_id]
    # bf16 solutions run under the interpreter only to capture their launches (status unverifiable).
    assert v.resources, f"{task_id}: no gfx942 compile results\n{v.diagnostics[-800:]}"
    for r in v.resources:
        assert r.arch == "gfx942"
        assert r.compiled, f"{task_id}/{r.kernel}: {r.error}"
        assert r.vgpr is not None and r.sgpr is not None and r.lds_limit == 64 * 1024
        assert r.lds_bytes is None or r.lds_bytes <= r.lds_limit, f"{task_id}/{r.kernel}: LDS {r.lds_bytes}"


def test_concurrent_candidates_of_one_task_share_one_reference(tmp_path, monkeypatch) -> None:
    """Samples of one task verified at once wait for one reference computation (an eval's samples
    are adjacent; before this, each computed its own, up to --jobs times the work)."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = next(t for t in TASKS if t.id == "l1_relu")
    sol = str(solution_path(task.id))
    with Verifier("cpu", jobs=3, spares=3, timeout=240) as verifier:
        results = verifier.verify_many([(task, sol)] * 3)
        assert [v.status for v in results] == ["ok"] * 3
        assert verifier.reference_runs == 1
