"""Every bundled Triton reference solution is `ok` on the CPU interpreter (or `unverifiable`
with a reason the interpreter really cannot judge, e.g. bf16)."""

from __future__ import annotations

import pytest

from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_builtin
from amdkv.verify import Verifier
from amdkv.verify.batch import verify_many

INTERPRETER_LIMITS = {"bf16_on_interpreter", "libdevice_on_interpreter", "inline_asm_on_interpreter"}
TASKS = load_builtin()


@pytest.fixture(scope="module")
def verdicts() -> dict:
    pairs = [(t, str(solution_path(t.id))) for t in TASKS]
    with Verifier("cpu", spares=2, timeout=240) as verifier:
        results = verify_many(verifier, pairs, jobs=2)
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
