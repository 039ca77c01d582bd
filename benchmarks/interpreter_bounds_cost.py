"""What the interpreter's bounds checker (amdkv/verify/interpreter_bounds.py) costs: the bundled
Triton reference solutions verified on `cpu` with the checker and without it, in one run on one
machine, alternating the order each round so that drift in the machine's load hits both sides.

    python benchmarks/interpreter_bounds_cost.py --out bounds_out [--rounds 2] [--jobs 2] [--task l1_relu ...]

Each measured pass runs in a child process of its own (its own fork server and workers). The pass
without the checker gets a `sitecustomize.py` on PYTHONPATH that makes
`InterpreterBoundsChecker.install` a no-op in that child and every worker it starts: the library
itself has no switch to turn the checker off. References are computed once by a first pass that
is not counted. Reported per mode: wall seconds of the pass, the sums over solutions of the
worker's `trials` phase (the candidate's forward calls, where every checked access happens), of the
worker's job CPU seconds and of `candidate_s`; per solution, the ratios with/without (median and
largest); whether every status agrees. Then two measurements that hold on a busy machine: one check
in isolation (microseconds per access), and the checker's own CPU share of every solution's forward
in one interpreter process (`attribution`). Writes interpreter_bounds_cost.json and .md to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from report_files import markdown_table, write_report  # noqa: E402

NO_CHECK_SITECUSTOMIZE = '''\
# Written by benchmarks/interpreter_bounds_cost.py for its pass without the bounds checker.
from amdkv.verify import interpreter_bounds
interpreter_bounds.InterpreterBoundsChecker.install = lambda self: None
'''


def one_pass(task_ids: list[str], jobs: int) -> dict[str, Any]:
    """Verify the bundled solutions once in this process; per-solution status and timings."""
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_builtin
    from amdkv.verify.batch import verify_many
    from amdkv.verify.verifier import Verifier

    tasks = [t for t in load_builtin() if not task_ids or t.id in task_ids]
    pairs = [(t, str(solution_path(t.id))) for t in tasks if solution_path(t.id)]
    t0 = time.monotonic()
    with Verifier("cpu", spares=jobs, timeout=240) as verifier:
        verdicts = verify_many(verifier, pairs, jobs=jobs)
    wall = time.monotonic() - t0
    return {"wall_s": round(wall, 2), "solutions": {
        t.id: {"status": v.status, "reason": v.reason, "trials_s": v.timings.get("worker_trials_s"),
               "job_cpu_s": v.timings.get("worker_job_cpu_s"), "candidate_s": v.timings.get("candidate_s")}
        for (t, _), v in zip(pairs, verdicts)}}


def attribution(task_ids: list[str]) -> dict[str, Any]:
    """Run in a child with TRITON_INTERPRET=1: each bundled solution's forward on the first input
    of each correctness case, in this process, with the checker installed and its own time counted
    (this thread's CPU time inside `check` against the process's CPU time for the whole forward).
    Both see the same machine load, so the share holds on a busy machine where with/without wall
    times do not."""
    import numpy as np
    import torch

    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.loader import import_source_file
    from amdkv.tasks.suites import load_builtin
    from amdkv.verify.interpreter_bounds import ACCESS_LOAD, InterpreterBoundsChecker

    spent = {"checks": 0, "s": 0.0}
    checker = InterpreterBoundsChecker()
    original = checker.check

    def timed_check(*a: Any) -> None:
        # this thread's CPU only: BLAS threads spinning after the interpreter's np.matmul would
        # otherwise be counted as the checker's
        t0 = time.thread_time()
        try:
            original(*a)
        finally:
            spent["checks"] += 1
            spent["s"] += time.thread_time() - t0

    checker.check = timed_check  # type: ignore[method-assign]
    checker.install()
    # numpy's first masked reduction in a process takes milliseconds: pay it before counting
    warm = torch.zeros(4, 4)
    checker.begin_launch("warm-up")
    checker.set_arguments([("warm", warm)])
    original(ACCESS_LOAD, (warm.data_ptr() + 4 * np.arange(16)).astype(np.uint64).reshape(4, 4),
             np.ones((4, 4), dtype=bool), 4)
    checker.end_launch()
    rows: dict[str, Any] = {}
    for task in load_builtin():
        sol = solution_path(task.id)
        if (task_ids and task.id not in task_ids) or not sol or "bf16" in task.dtypes:
            continue
        module = import_source_file(str(sol), f"bounds_cost_{task.id}")
        spent.update(checks=0, s=0.0)
        t0 = time.process_time()
        for case in task.cases_tagged("correctness"):
            torch.manual_seed(0)
            model = module.ModelNew(*case.init_inputs).eval()
            with torch.no_grad():
                model(*case.make_inputs())
        rows[task.id] = {"forward_cpu_s": round(time.process_time() - t0, 4), "checks": spent["checks"],
                         "check_cpu_s": round(spent["s"], 4)}
    return rows


def per_access_us(repeat: int = 2000) -> dict[str, float]:
    """Microseconds one InterpreterBoundsChecker.check takes, for typical access shapes, against a
    launch with three tensor arguments (the interpreter's own cost per access is not included)."""
    import numpy as np
    import torch

    from amdkv.verify.interpreter_bounds import ACCESS_LOAD, InterpreterBoundsChecker

    x, y, out = torch.zeros(64, 1024), torch.zeros(1024), torch.zeros(64, 1024)
    checker = InterpreterBoundsChecker()
    checker.begin_launch("bench")
    checker.set_arguments([("x", x), ("y", y), ("out", out)])
    lanes = np.arange(1024)
    shapes = {
        "scalar": (np.array([out.data_ptr()], dtype=np.uint64), np.ones(1, dtype=bool)),
        "1024 lanes, all active": ((out.data_ptr() + 4 * lanes).astype(np.uint64), np.ones(1024, dtype=bool)),
        "1024 lanes, half masked": ((out.data_ptr() + 4 * lanes).astype(np.uint64), lanes < 512),
        "64x64 tile": ((x.data_ptr() + 4 * (np.arange(64)[:, None] * 1024 + np.arange(64)[None, :])).astype(np.uint64),
                       np.ones((64, 64), dtype=bool)),
    }
    out_us = {}
    for name, (ptrs, mask) in shapes.items():
        t0 = time.perf_counter()
        for _ in range(repeat):
            checker.check(ACCESS_LOAD, ptrs, mask, 4)
        out_us[name] = round((time.perf_counter() - t0) / repeat * 1e6, 2)
    return out_us


def run_child(mode: str, args: argparse.Namespace, cache_dir: str, site_dir: str) -> dict[str, Any]:
    """mode "on"/"off": one verification pass with/without the checker; "attribution": see attribution()."""
    env = dict(os.environ, AMDKV_CACHE_DIR=cache_dir)
    path = [str(ROOT)] + ([site_dir] if mode == "off" else []) + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    cmd = [sys.executable, __file__, "--child", "--jobs", str(args.jobs)] + [x for t in args.task for x in ("--task", t)]
    if mode == "attribution":
        env["TRITON_INTERPRET"] = "1"
        cmd.append("--attribution")
    print(f"[bounds_cost] {mode if mode == 'attribution' else 'pass with the checker ' + mode}", file=sys.stderr,
          flush=True)
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"the {mode} pass failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarise(passes: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"modes": {}}
    for mode in ("on", "off"):
        mine = [p for m, p in passes if m == mode]
        out["modes"][mode] = {
            "passes": len(mine), "wall_s": [p["wall_s"] for p in mine],
            "trials_s_sum": [round(sum(s["trials_s"] or 0 for s in p["solutions"].values()), 2) for p in mine],
            "job_cpu_s_sum": [round(sum(s["job_cpu_s"] or 0 for s in p["solutions"].values()), 2) for p in mine],
            "candidate_s_sum": [round(sum(s["candidate_s"] or 0 for s in p["solutions"].values()), 2) for p in mine]}
    on = [p for m, p in passes if m == "on"]
    off = [p for m, p in passes if m == "off"]
    # per solution, with / without (median over passes) of the worker's CPU seconds (robust on a
    # shared machine) and of its trials wall seconds; solutions that did not run (unverifiable) skip
    for metric in ("job_cpu_s", "trials_s"):
        ratios = {}
        for tid in on[0]["solutions"]:
            with_, without = ([p["solutions"][tid][metric] for p in side] for side in (on, off))
            if None not in with_ + without and statistics.median(without) > 0:
                ratios[tid] = round(statistics.median(with_) / statistics.median(without), 3)
        out[f"{metric}_ratio_median"] = round(statistics.median(ratios.values()), 3) if ratios else None
        out[f"{metric}_ratio_largest"] = sorted(ratios.items(), key=lambda kv: -kv[1])[:5]
    out["statuses_agree"] = all(p["solutions"][t]["status"] == on[0]["solutions"][t]["status"]
                                for p in on + off for t in on[0]["solutions"])
    statuses: dict[str, int] = {}
    for s in on[0]["solutions"].values():
        statuses[s["status"]] = statuses.get(s["status"], 0) + 1
    out["statuses_with_checker"] = statuses
    out["solutions"] = len(on[0]["solutions"])
    return out


def markdown(res: dict[str, Any]) -> str:
    s = res["summary"]
    lines = [f"Bounds checker cost on {res['host']} ({res['cores']} cores), platform cpu (Triton {res['triton']} "
             f"interpreter), {s['solutions']} bundled solutions, --jobs {res['jobs']}, {res['rounds']} round(s).", ""]
    lines += markdown_table(
        ["checker", "passes", "wall s per pass", "sum of worker trials s", "sum of worker job CPU s",
         "sum of candidate_s"],
        [[mode, m["passes"], m["wall_s"], m["trials_s_sum"], m["job_cpu_s_sum"], m["candidate_s_sum"]]
         for mode, m in s["modes"].items()])
    lines += ["", "Per solution, with / without (median over passes): worker job CPU seconds, median ratio "
              f"{s['job_cpu_s_ratio_median']} (largest {s['job_cpu_s_ratio_largest']}); trials wall seconds, "
              f"median ratio {s['trials_s_ratio_median']} (largest {s['trials_s_ratio_largest']}).",
              f"Statuses agree in every pass: {s['statuses_agree']} ({s['statuses_with_checker']}).", "",
              "One check in isolation (this process, microseconds per access): " +
              ", ".join(f"{k} {v}" for k, v in res["per_access_us"].items()) + "."]
    att = res.get("attribution") or {}
    if att:
        shares = {t: r["check_cpu_s"] / r["forward_cpu_s"] for t, r in att.items() if r["forward_cpu_s"] > 0}
        top = sorted(shares.items(), key=lambda kv: -kv[1])[:5]
        lines += ["", f"Checker's own CPU time inside the forwards of {len(att)} solutions (one process, every "
                  f"correctness case once): {sum(r['checks'] for r in att.values())} checks, "
                  f"{sum(r['check_cpu_s'] for r in att.values()):.2f} s of "
                  f"{sum(r['forward_cpu_s'] for r in att.values()):.2f} s "
                  f"({100 * sum(r['check_cpu_s'] for r in att.values()) / max(1e-9, sum(r['forward_cpu_s'] for r in att.values())):.1f}%); "
                  f"median share per solution {100 * statistics.median(shares.values()):.1f}%, largest "
                  + ", ".join(f"{t} {100 * v:.1f}%" for t, v in top) + "."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=2, help="pairs of passes (on/off, then off/on, ...)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--task", action="append", default=[], help="only this bundled task (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--attribution", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(attribution(args.task) if args.attribution else one_pass(args.task, args.jobs)))
        return 0
    if not args.out:
        ap.error("--out is required")
    import platform as pyplatform

    import triton

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="amdkv-bounds-cost-") as tmp:
        site_dir = os.path.join(tmp, "site")
        os.makedirs(site_dir)
        Path(site_dir, "sitecustomize.py").write_text(NO_CHECK_SITECUSTOMIZE)
        cache_dir = os.path.join(tmp, "cache")
        run_child("on", args, cache_dir, site_dir)  # fills the reference cache: not counted
        passes: list[tuple[str, dict[str, Any]]] = []
        res: dict[str, Any] = {"host": pyplatform.node(), "cores": os.cpu_count(), "triton": triton.__version__,
                               "jobs": args.jobs, "rounds": args.rounds, "passes": passes}
        for r in range(args.rounds):
            for mode in (("on", "off") if r % 2 == 0 else ("off", "on")):
                passes.append((mode, run_child(mode, args, cache_dir, site_dir)))
        res["summary"] = summarise(passes)
        res["per_access_us"] = per_access_us()
        res["attribution"] = run_child("attribution", args, cache_dir, site_dir)
    print(write_report(out, "interpreter_bounds_cost", res, markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
