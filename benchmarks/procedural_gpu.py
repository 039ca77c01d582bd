"""The procedural suites' templated solutions through the verifier on a GPU, in one call.

    python benchmarks/procedural_gpu.py --out proc_gpu [--n 512] [--jobs 6] [--gpus N] [--budget-s 200]
    python benchmarks/procedural_gpu.py --out proc_cpu --device cpu --n 12 --jobs 2   # the CPU rehearsal

Draws a sample of `--n` tasks from `procedural:all?n=<suite-train>&seed=<seed>`, round-robin over
core x dtype (train and held-out tasks alike, in suite order), and verifies each task's templated
Triton solution with every check on: correctness cases (3 seeded trials), the performance case
(timed, with the roofline floor), the re-checks. `--hip K` also verifies K HIP solutions (a HIP
build takes ~40-50 s on an H200 host: not for the 4-minute call). One scheduler thread pool per
visible GPU (amdkv.verify.scheduler); candidates not started within `--budget-s` are counted as not
run. Writes OUT/verdicts.jsonl (one verdict per line, as it arrives), OUT/summary.json and
OUT/table.md, and prints the table last. Numbers name their platform: `cuda` numbers are NVIDIA
numbers, not AMD ones.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE as NOT_STARTED


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts and speedups per language x template x dtype, from the verdict rows that ran."""
    run = [r for r in rows if r["reason"] != NOT_STARTED]
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in run:
        groups[f"{r['language']}/{r['template']}/{r['dtype']}"].append(r)
    table = {}
    for key, rs in sorted(groups.items()):
        table[key] = {"verified": len(rs), "ok": sum(r["status"] == "ok" for r in rs),
                      "statuses": dict(collections.Counter(r["status"] for r in rs)),
                      "speedup_geomean": _geomean([r["speedup"] for r in rs if r["status"] == "ok"]),
                      "sol_median": statistics.median([r["sol"] for r in rs if r["sol"]]) if any(r["sol"] for r in rs)
                      else None}
    return {"verified": len(run), "ok": sum(r["status"] == "ok" for r in run), "not_started": len(rows) - len(run),
            "statuses": dict(collections.Counter(r["status"] for r in run)),
            "by_split": {s: {"verified": sum(r["split"] == s for r in run),
                             "ok": sum(r["split"] == s and r["status"] == "ok" for r in run)}
                         for s in sorted({r["split"] for r in run})},
            "by_group": table,
            "not_ok": [r for r in run if r["status"] != "ok"][:20]}


def render_table(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [f"procedural templated solutions on {meta['platform']} ({meta['device']}), {meta['gpus']} GPU(s), "
             f"{meta['jobs']} jobs, {meta['wall_s']:.0f} s: {summary['ok']}/{summary['verified']} ok "
             f"({summary['not_started']} not started before the budget); "
             + ", ".join(f"{s} {d['ok']}/{d['verified']}" for s, d in summary["by_split"].items()),
             "", "| language/template/dtype | verified | ok | statuses | speedup vs eager (geomean, ok) | sol (median) |",
             "|---|---:|---:|---|---:|---:|"]
    for key, g in summary["by_group"].items():
        sp = "-" if g["speedup_geomean"] is None else f"{g['speedup_geomean']:.2f}"
        sol = "-" if g["sol_median"] is None else f"{g['sol_median']:.2f}"
        lines.append(f"| {key} | {g['verified']} | {g['ok']} | "
                     f"{', '.join(f'{k} {v}' for k, v in g['statuses'].items())} | {sp} | {sol} |")
    if meta["platform"] == "cuda":
        lines.append("\nPlatform cuda: NVIDIA timings, not AMD numbers.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=512, help="Triton solutions to verify")
    ap.add_argument("--suite-train", type=int, default=1500, help="size of the train split the sample is drawn from")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "rocm"])
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use (default: every visible one)")
    ap.add_argument("--jobs", type=int, default=6, help="candidates verified at once per GPU")
    ap.add_argument("--budget-s", type=float, default=200.0, help="stop starting candidates after this")
    ap.add_argument("--hip", type=int, default=0, help="also verify this many HIP solutions (slow builds)")
    ap.add_argument("--no-timing", action="store_true", help="correctness cases only (no performance case)")
    ap.add_argument("--trials", type=int, default=3, help="seeded trials per correctness case (verifier default 3)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from amdkv.reports.jsonl import JsonlAppender
    from amdkv.tasks.loader import load_task
    from amdkv.tasks.procedural import checks, generator_version, suite_paths, suite_specs, task_file
    from amdkv.tasks.solutions import solution_for
    from amdkv.verify.platform import detect_platform
    from amdkv.verify.pool import default_gpu_mem_fraction
    from amdkv.verify.scheduler import MultiGpuScheduler, gpu_count
    from amdkv.verify.verifier import Verifier

    t0 = time.monotonic()
    spec = f"procedural:all?n={args.suite_train}&seed={args.seed}"
    n_suite = len(suite_paths(spec))  # written (or found) in the cache
    specs = suite_specs(spec)         # drawn again, so that only the sample is loaded
    sample = [load_task(task_file(s), suite="procedural") for s in checks.balanced_sample(specs, args.n)]
    hip_specs = checks.balanced_sample([s for s in specs if s.composition.template != "matmul"], args.hip)
    hip_tasks = [load_task(task_file(s), suite="procedural") for s in hip_specs]
    pairs = [(t, str(solution_for(t, "triton")), "triton") for t in sample]
    pairs += [(t, str(solution_for(t, "hip")), "hip") for t in hip_tasks]
    prep_s = time.monotonic() - t0
    print(f"[procedural_gpu] {n_suite} tasks of {spec} (generator {generator_version()}) in {prep_s:.1f} s; "
          f"verifying {len(sample)} Triton + {len(hip_tasks)} HIP solutions", file=sys.stderr, flush=True)

    platform = detect_platform(args.device)
    visible = gpu_count(platform.name)
    gpus = list(range(min(args.gpus or visible, visible))) if visible else [0]
    language_of = {cand: lang for _, cand, lang in pairs}
    rows: list[dict[str, Any]] = []
    lock = threading.Lock()
    sink = JsonlAppender(out / "verdicts.jsonl", fresh=True, allow_nan=True).open()
    done = [0]

    def on_result(task: Any, cand: str, verdict: Any) -> None:
        row = {"task_id": task.id, "language": language_of[cand], "split": task.split,
               "template": task.metadata.get("template"), "dtype": task.dtypes[0],
               "composition": task.metadata.get("composition"), "status": verdict.status, "reason": verdict.reason,
               "speedup": verdict.speedup, "sol": verdict.sol, "platform": verdict.platform, "device": verdict.device,
               "total_s": verdict.timings.get("total_s")}
        with lock:
            rows.append(row)
            done[0] += 1
            if done[0] % 25 == 0:
                print(f"[procedural_gpu] {done[0]}/{len(pairs)} done", file=sys.stderr, flush=True)
        if verdict.reason != NOT_STARTED:
            sink.append(dict(verdict.to_dict(), procedural=row))

    def factory(i: int) -> Any:
        return Verifier(args.device, device_index=i, spares=args.jobs, compile_baseline=False, trials=args.trials,
                        time_performance=not args.no_timing, gpu_mem_fraction=default_gpu_mem_fraction(args.jobs))

    t_start = time.monotonic()
    with MultiGpuScheduler(factory, gpus, jobs_per_gpu=args.jobs) as sched:
        sched.verify_many([(t, c) for t, c, _ in pairs], on_result=on_result, deadline=t_start + args.budget_s)
    wall = time.monotonic() - t_start
    sink.close()
    summary = summarise(rows)
    device = next((r["device"] for r in rows if r["device"]), platform.name)
    meta = {"platform": platform.name, "device": device, "gpus": len(gpus) if visible else 0, "jobs": args.jobs,
            "wall_s": wall, "prep_s": prep_s, "spec": spec, "generator_version": generator_version(),
            "timing": not args.no_timing, "trials": args.trials, "budget_s": args.budget_s}
    (out / "summary.json").write_text(json.dumps({"meta": meta, "summary": summary}, indent=1, default=str))
    table = render_table(summary, meta)
    (out / "table.md").write_text(table + "\n")
    print(table)
    # HIP on the cpu platform is compile-only (`unverifiable`, no_hip_runtime): not a failure there
    failed = [r for r in rows if r["reason"] != NOT_STARTED and r["status"] != "ok"
              and not (r["status"] == "unverifiable" and r["platform"] == "cpu")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
