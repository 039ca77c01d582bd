"""Verify the adversarial candidate set (tests/data/adversarial) on the local GPU and record
expected vs actual statuses as JSON lines (the GPU half of the adversarial test)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amdkv.tasks.builtin import BUILTIN_ROOT
from amdkv.verify import Verifier

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "adversarial"


def task_path(task_id: str) -> Path:
    for p in list(BUILTIN_ROOT.glob(f"*/{task_id}.py")) + list((ROOT / "tasks").glob(f"{task_id}.py")):
        return p
    raise SystemExit(f"unknown task {task_id}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    manifest = json.loads((ROOT / "manifest.json").read_text())
    agree = 0
    with Verifier(args.device, spares=2, timeout=30, compile_baseline=False) as verifier, open(args.out, "w") as fh:
        for entry in manifest:
            v = verifier.verify(task_path(entry["task"]), ROOT / entry["candidate"])
            d = v.to_dict()
            d["candidate"] = entry["candidate"]
            d["expected_status"] = entry["status"]
            fh.write(json.dumps(d) + "\n")
            same = v.status == entry["status"]
            agree += same
            print(f"{'ok  ' if same else 'DIFF'} {entry['candidate']:<40} expected {entry['status']:<14} got "
                  f"{v.status} ({v.reason})", flush=True)
    print(f"{agree}/{len(manifest)} statuses as on CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
