"""Write an `amdkv eval` samples file over the bundled suites: per task, the reference Triton
solution plus two deliberately broken samples (used for the H200 eval run in docs/eval_h200.md).

Broken sample 1 (compile error): the reference source cut off two thirds of the way through.
Broken sample 2 (cheat): the reference wrapped so that forward nudges its output with a PyTorch
multiply (the verifier must call this `hack_detected`, not `ok` and not a mere mismatch).
Sample order per task: [broken-compile, reference, broken-cheat], so pass@1 = 1/3 by construction
and pass@3 = 1.0 for every task whose reference is correct on the platform.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_suite

CHEAT_WRAPPER = '''

_ReferenceModelNew = ModelNew


class ModelNew(_ReferenceModelNew):
    def forward(self, *args):
        out = super().forward(*args)
        return out * 1.0001 if isinstance(out, torch.Tensor) else out
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--suite", default="builtin:all")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    lines = []
    for task in load_suite(args.suite):
        path = solution_path(task.id, "triton")
        if path is None:
            continue
        ref = path.read_text()
        cut = ref[: (2 * len(ref)) // 3]
        lines.append({"task_id": task.id, "samples": [cut, ref, ref + CHEAT_WRAPPER]})
    Path(args.out).write_text("".join(json.dumps(x) + "\n" for x in lines))
    print(f"wrote {len(lines)} tasks x 3 samples to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
