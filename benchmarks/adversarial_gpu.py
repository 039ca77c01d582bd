"""Verify the adversarial candidate set (tests/data/adversarial) on the local GPU and record
expected vs actual statuses as JSON lines (the GPU half of the adversarial test).

    python benchmarks/adversarial_gpu.py --out adversarial.jsonl [--jobs 4] [--timeout 30] [--only a.py,b.py]

The expected status is the manifest's `status_gpu` where it names a documented platform difference
(its `why_gpu` says why; a list when either of two checks may reject first), else the CPU `status`.
A candidate with `gap_gpu` is one the GPU is known to accept although the CPU rejects it (no access
checker on compiled kernels, docs/interpreter_bounds.md): its line says GAP when it is `ok` there,
and it is counted apart, never as expected.

Candidates run `--jobs` at a time (each in its own fresh worker, as always); each verdict is
written as soon as it arrives, so a run cut short keeps what it finished.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import threading
from pathlib import Path

from amdkv.reports.jsonl import JsonlAppender
from amdkv.tasks.builtin import task_path as builtin_task_path
from amdkv.verify import Verifier

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "adversarial"


def task_path(task_id: str) -> Path:
    """A bundled task, or one of the small test tasks of the adversarial set."""
    path = builtin_task_path(task_id) or next((ROOT / "tasks").glob(f"{task_id}.py"), None)
    if path is None:
        raise SystemExit(f"unknown task {task_id}")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", type=int, default=4, help="candidates verified at once")
    ap.add_argument("--timeout", type=float, default=30.0, help="per-candidate process timeout (s)")
    ap.add_argument("--only", default=None, help="comma-separated candidate file names")
    args = ap.parse_args()
    manifest = json.loads((ROOT / "manifest.json").read_text())
    if args.only:
        manifest = [e for e in manifest if e["candidate"] in set(args.only.split(","))]
    lock = threading.Lock()
    counts = {"expected": 0, "gap": 0, "unexpected": 0}
    with Verifier(args.device, spares=args.jobs, timeout=args.timeout, compile_baseline=False,
                  verdict_cache=False) as verifier, \
            JsonlAppender(args.out, fresh=True, allow_nan=True) as out:

        def one(entry: dict) -> None:
            v = verifier.verify(task_path(entry["task"]), ROOT / entry["candidate"])
            d = v.to_dict()
            expected = entry.get("status_gpu", entry["status"])
            accepted = expected if isinstance(expected, list) else [expected]
            d["candidate"] = entry["candidate"]
            d["expected_status"] = expected
            d["cpu_status"] = entry["status"]
            same = v.status in accepted
            gap = not same and "gap_gpu" in entry and v.status == "ok"
            d["known_gpu_gap"] = gap
            out.append(d)
            with lock:
                counts["expected" if same else "gap" if gap else "unexpected"] += 1
                print(f"{'ok  ' if same else 'GAP ' if gap else 'DIFF'} {entry['candidate']:<40} expected "
                      f"{'/'.join(accepted):<14} got {v.status} ({v.reason})", flush=True)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for f in [pool.submit(one, e) for e in manifest]:
                f.result()
    print(f"{counts['expected']}/{len(manifest)} statuses as expected on this GPU (the CPU status, or the documented "
          f"status_gpu for {sum('status_gpu' in e for e in manifest)} of them); {counts['gap']} known GPU gaps "
          f"(gap_gpu: accepted here, rejected on CPU); {counts['unexpected']} unexpected")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
