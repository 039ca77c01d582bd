"""Generate a procedural suite from scratch and check every task, on the CPU (numbers for
docs/procedural_tasks.md).

    python benchmarks/procedural_checks.py --n 5000 --out bench_out [--jobs 2] [--trials 1] [--per-stratum 1]

`--n` tasks in all, as `procedural:all?n=<train>` (train + train // 10 held out; 5,000 = 4,546 + 454).
Steps, each timed: generate + write the files into a fresh cache folder; the fast path on every
task (its workers load each task file); the verifier (every check, platform cpu) on `--per-stratum` tasks of each
core x dtype. Writes OUT/procedural_checks.json (every result) and OUT/procedural_checks.md, and
prints the table last. The machine's load average is recorded: the dev machine is shared, and
numbers measured while others run are slower than the machine can do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=5000, help="tasks in all (about 10/11 train, 1/11 heldout)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--trials", type=int, default=1, help="seeded trials per correctness case on the fast path")
    ap.add_argument("--per-stratum", type=int, default=1, help="verifier sample: tasks per core x dtype")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_train = next(t for t in range(args.n + 1) if t + max(1, t // 10) >= args.n)  # all?n=t has t // 10 held out
    spec = f"procedural:all?n={n_train}&seed={args.seed}"

    # a fresh cache: generation is measured from nothing (references of the verifier sample too)
    os.environ["AMDKV_CACHE_DIR"] = tempfile.mkdtemp(prefix="amdkv-proc-bench-")
    from amdkv.tasks.loader import load_task
    from amdkv.tasks.procedural import checks, generator_version, suite_paths, suite_specs, task_file

    load0 = os.getloadavg()
    t_all = time.monotonic()
    t0 = time.monotonic()
    paths = suite_paths(spec)
    gen_s = time.monotonic() - t0
    t0 = time.monotonic()
    fast = checks.check_tasks(paths, jobs=args.jobs, trials=args.trials)
    fast_s = time.monotonic() - t0
    t0 = time.monotonic()
    picked = checks.stratified_sample(suite_specs(spec), args.per_stratum, by="core")  # drawn, not loaded
    sample = [load_task(task_file(s), suite="procedural") for s in picked]
    verified = checks.verify_sample(sample, device="cpu", jobs=args.jobs) if sample else []
    verify_s = time.monotonic() - t0
    total_s = time.monotonic() - t_all
    load1 = os.getloadavg()

    summary = checks.summarise(fast + verified)
    result = {
        "spec": spec, "tasks": len(paths), "generator_version": generator_version(), "jobs": args.jobs,
        "fast_trials": args.trials, "cpu_count": os.cpu_count(), "loadavg_start": load0, "loadavg_end": load1,
        "seconds": {"generate_and_write": round(gen_s, 1),
                    "fast_checks": round(fast_s, 1), "verifier_sample": round(verify_s, 1), "total": round(total_s, 1)},
        "fast_cpu_seconds_per_task": round(sum(r.cpu_seconds for r in fast) / max(1, len(fast)), 4),
        "verifier_sample_size": len(verified), "summary": summary,
        "failures": [r.to_dict() for r in fast + verified if not r.ok],
    }
    (out / "procedural_checks.json").write_text(json.dumps(
        dict(result, results=[r.to_dict() for r in fast + verified]), indent=1, default=str))
    lines = [f"procedural checks: {len(paths)} tasks ({spec}), generator {generator_version()}, "
             f"{args.jobs} jobs on {os.cpu_count()} cores, load average {load0[0]:.1f} -> {load1[0]:.1f}",
             "", "| step | seconds |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in result["seconds"].items()]
    lines += ["", "| path | platform | checked | ok | failed |", "|---|---|---:|---:|---:|"]
    for path, d in summary.items():
        lines.append(f"| {path} | {d['platform']} | {d['checked']} | {d['ok']} | {d['checked'] - d['ok']} |")
    lines.append(f"\nfast path: {result['fast_cpu_seconds_per_task']} CPU-s per task, {args.trials} trial(s) per case")
    (out / "procedural_checks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if not result["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
