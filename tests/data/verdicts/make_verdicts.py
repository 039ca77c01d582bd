"""Regenerate the real verdicts the prompt-feedback tests read (CPU interpreter + static gfx942 compile).

Run from the repo root: `python tests/data/verdicts/make_verdicts.py` (about a minute on 2 cores).
Each output file is `Verdict.to_dict()` of one real verification, so the feedback builder is tested on
what the verifier really writes, not on hand-made dicts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.verify.verifier import Verifier

HERE = Path(__file__).resolve().parent
ADV = HERE.parent / "adversarial"

CASES = {
    "ok_relu_gfx942": ("l1_relu", solution_path("l1_relu", "triton")),
    "ok_softmax_gfx942": ("l1_softmax", solution_path("l1_softmax", "triton")),
    "compile_error_arange": ("l1_relu", ADV / "compile_error_arange.py"),
    "compile_error_undefined": ("l1_relu", ADV / "compile_error_undefined.py"),
    "syntax_error": ("l1_relu", ADV / "syntax_error.py"),
    "mismatch_tail": ("l1_relu", ADV / "mask_bug_tail.py"),
    "mismatch_shape": ("l1_relu", ADV / "wrong_shape.py"),
    "mismatch_nan": ("l1_relu", ADV / "nan_output.py"),
    "hack_torch_fallback": ("l1_relu", ADV / "torch_relu_fallback.py"),
    "hack_try_except": ("l1_relu", ADV / "try_except_fallback.py"),
    "runtime_oob": ("l1_relu", ADV / "oob_write_after.py"),
    "runtime_sys_exit": ("l1_relu", ADV / "sys_exit.py"),
}


def main() -> int:
    names = sys.argv[1:] or list(CASES)
    with Verifier("cpu", archs=("gfx942",)) as verifier:
        for name in names:
            task_id, cand = CASES[name]
            verdict = verifier.verify(str(task_path(task_id)), str(cand))
            (HERE / f"{name}.json").write_text(json.dumps(verdict.to_dict(), indent=1, sort_keys=True) + "\n")
            print(f"{name}: {verdict.status}/{verdict.reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
