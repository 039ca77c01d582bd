"""Verification throughput on GPUs: verified Triton candidates per minute, cold and warm.

Candidates are the bundled Triton reference solutions (amdkv/tasks/builtin/solutions/triton/) of
the first --tasks level-1 tasks, copied to distinct files (a comment line differs) and repeated
to --candidates, verified with every check on (static checks, 3 seeded trials per correctness
case, runtime guards, re-check, timing of performance cases with the call after timing
compared, wall-clock cross-check, roofline floor).

Phases (each one MultiGpuScheduler.verify_many; spares per GPU = --jobs):
  cold : empty reference cache (fresh AMDKV_CACHE_DIR), fresh Triton and inductor caches
  warm : same candidates again, reference cache filled
  warm_2gpu (--gpus 2): warm again over two GPUs, one scheduler per GPU -> scaling vs warm
Every candidate process compiles its own kernels (per-process TRITON_CACHE_DIR, by design), so
"warm" means warm references, not warm kernels.

Steady state = completions after the first 20% (ramp-up: spares starting, first references).
`--phases prime,warm,warm_2gpu` skips the cold phase: `prime` verifies one candidate per task
(not counted) so that the warm phases find their references cached; it is the shortest run that
measures the two-GPU scaling.

    python benchmarks/throughput.py --out tp_out                       # 1 GPU, 60 candidates/phase
    python benchmarks/throughput.py --out tp_out --gpus 2              # + the two-GPU phase
    python benchmarks/throughput.py --out tp_out --candidates 100 --jobs 6

Each phase stops starting new candidates after --phase-budget-s (default 110 s), so the whole run
stays within ~5 minutes; candidates not started are reported as skipped.
Writes throughput.json and throughput.md to --out, prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_cpu import busy_core_seconds, busy_pct, host_cpu_ticks  # noqa: E402
from parent_profile import ParentProfile  # noqa: E402
from report_files import write_report  # noqa: E402

from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE  # noqa: E402


def make_candidates(n: int, n_tasks: int, workdir: Path) -> list[tuple[Any, str]]:
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite

    tasks = [t for t in load_suite("builtin:all") if t.id.startswith("l1_") and solution_path(t.id, "triton")]
    tasks = sorted(tasks, key=lambda t: t.id)[:n_tasks]
    if not tasks:
        raise SystemExit("no bundled level-1 Triton solutions found")
    pairs = []
    for i in range(n):
        t = tasks[i % len(tasks)]
        src = solution_path(t.id, "triton").read_text()
        p = workdir / f"cand_{i:04d}_{t.id}.py"
        p.write_text(f"# throughput variant {i}\n" + src)
        pairs.append((t, str(p)))
    return pairs


# `phase:OPTION` -> the settings it turns off (to "0") for that phase, for before/after on the same
# candidates in one run: `base` = session 7's worker speed-ups (blocking CUDA syncs, the prebuilt
# Triton driver helper); `noseed` = the prebuilt helper alone (on by default again since session 18:
# docs/gpu.md); `hostinputs` = session 9's device-resident trial inputs
SWITCHED_OFF = {"base": ("AMDKV_BLOCKING_SYNC", "AMDKV_SEED_TRITON_STUBS"),
                "noseed": ("AMDKV_SEED_TRITON_STUBS",),
                "hostinputs": ("AMDKV_RESIDENT_INPUTS",),
                # the shared Triton launchers (on by default since session 22)
                "nolaunchers": ("AMDKV_SHARE_TRITON_LAUNCHERS",)}
# `phase:seed` turns the prebuilt Triton driver helper on whatever the caller's environment says (it was
# off by default from session 12's crashes to session 18's green probe: docs/gpu.md, Known gaps)
SWITCHED_ON = {"seed": ("AMDKV_SEED_TRITON_STUBS",),
               # `phase:launchers`: Triton's launchers built once per signature by the parent (session 20;
               # verify/triton_launchers.py; on by default since session 22's measurement)
               "launchers": ("AMDKV_SHARE_TRITON_LAUNCHERS",)}


# verdict timings worker_<X>_s that are not job phases besides worker_startup_* and the CPU figures: the
# whole job, and the timing lock's wait and hold (inside the `timing` phase)
NOT_JOB_PHASES = ("worker_job_s", "worker_lock_wait_s", "worker_lock_held_s")


def unphased_job_s(timings: dict[str, Any]) -> float | None:
    """A candidate's worker job seconds outside every named phase (None without a job time)."""
    job = timings.get("worker_job_s")
    if not isinstance(job, (int, float)):
        return None
    parts = [v for k, v in timings.items() if k.startswith("worker_") and k.endswith("_s")
             and not k.endswith("cpu_s") and not k.startswith("worker_startup") and k not in NOT_JOB_PHASES
             and isinstance(v, (int, float))]
    return job - sum(parts)


def phase_environment(opts: list[str]) -> dict[str, str | None]:
    """The worker settings a phase's options set (value) or leave to their defaults (None)."""
    env: dict[str, str | None] = {}
    for table, value in ((SWITCHED_OFF, "0"), (SWITCHED_ON, "1")):
        for option, variables in table.items():
            for var in variables:
                if option in opts:
                    env[var] = value
                else:
                    env.setdefault(var, None)
    return env


def run_phase(name: str, pairs: list[tuple[Any, str]], *, gpus: list[int], jobs: int, budget_s: float,
              compile_baseline: bool, spares: int | None = None) -> dict[str, Any]:
    from amdkv.verify.pool import default_gpu_mem_fraction
    from amdkv.config import VerifierConfig
    from amdkv.verify.scheduler import MultiGpuScheduler
    from amdkv.verify.verifier import Verifier

    done_at: list[float] = []
    lock = threading.Lock()
    t_start = time.monotonic()

    def on_result(task: Any, cand: str, verdict: Any) -> None:
        with lock:
            if verdict.reason != NOT_STARTED_BEFORE_DEADLINE:
                done_at.append(time.monotonic() - t_start)

    def factory(i: int) -> Any:
        # the memory cap follows the candidates running at once (jobs), not the spares kept warm
        # verdict cache off: phases re-verify the same candidates and must measure verification
        return Verifier("auto", device_index=i, spares=spares or jobs, compile_baseline=compile_baseline,
                        gpu_mem_fraction=default_gpu_mem_fraction(jobs), verdict_cache=False)

    t0 = time.monotonic()
    config = VerifierConfig.from_env(verdict_cache=False)
    with MultiGpuScheduler(factory, gpus, config=config, jobs_per_gpu=jobs) as sched:
        setup_s = time.monotonic() - t0
        t_start = time.monotonic()
        cpu0 = host_cpu_ticks()
        with ParentProfile() as prof:
            verdicts = sched.verify_many(pairs, on_result=on_result, deadline=t_start + budget_s)
        cpu1 = host_cpu_ticks()
        wall = time.monotonic() - t_start
        stats = sched.stats()
    run = [v for v in verdicts if v.reason != NOT_STARTED_BEFORE_DEADLINE]
    statuses: dict[str, int] = {}
    for v in run:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    not_ok = [{"task": v.task_id, "status": v.status, "reason": v.reason, "diag": (v.diagnostics or "")[:300]}
              for v in run if v.status != "ok"][:10]
    done_at.sort()
    steady = done_at[max(1, len(done_at) // 5):]
    if len(steady) >= 2 and steady[-1] > steady[0]:
        steady_s_per = (steady[-1] - steady[0]) / (len(steady) - 1)
    else:
        steady_s_per = None
    per_cand = [v.timings.get("total_s") for v in run if v.timings.get("total_s")]
    # median of every timing the verdicts carry (parent phases, spare wait, worker phases incl.
    # the timing lock's wait): where a candidate's time goes
    phases = {}
    for key in sorted({k for v in run for k in v.timings}):
        vals = [v.timings[key] for v in run if isinstance(v.timings.get(key), (int, float))]
        if vals:
            phases[key] = round(statistics.median(vals), 3)
    # medians of the parts need not add up to the median of the whole (session 17 read a 0.58-s gap
    # into them): the part of each candidate's job no phase counts, per candidate, then its median
    unphased = [u for u in (unphased_job_s(v.timings) for v in run) if u is not None]
    if unphased:
        phases["worker_unphased_s"] = round(statistics.median(unphased), 3)
    methods: dict[str, int] = {}
    for v in run:
        for c in v.cases:
            if c.timing_method:
                methods[c.timing_method] = methods.get(c.timing_method, 0) + 1
    res = {
        "phase": name, "gpus": gpus, "jobs_per_gpu": jobs, "spares_per_gpu": spares or jobs, "candidates": len(pairs), "verified": len(run),
        "skipped_deadline": len(pairs) - len(run), "wall_s": round(wall, 2), "setup_s": round(setup_s, 2),
        "per_minute": round(len(run) / wall * 60, 2) if wall > 0 else None,
        "steady_s_per_candidate": round(steady_s_per, 3) if steady_s_per else None,
        "steady_per_minute": round(60 / steady_s_per, 2) if steady_s_per else None,
        "median_verify_latency_s": round(statistics.median(per_cand), 3) if per_cand else None,
        "median_phase_s": phases,
        "timing_lock_held_s_total": round(sum(v.timings.get("worker_lock_held_s", 0.0) for v in run), 2),
        "statuses": statuses, "not_ok": not_ok, "timing_methods": methods,
        "host_cpu_busy_pct": busy_pct(cpu0, cpu1),
        # the measure: the whole host's busy core-seconds (parent, workers, compilers,
        # spares started ahead) over the candidates verified in the phase
        "host_core_s_per_candidate": (round(busy_core_seconds(cpu0, cpu1) / len(run), 2)
                                      if run and busy_core_seconds(cpu0, cpu1) is not None else None),
        "worker_threads": os.environ.get("AMDKV_WORKER_THREADS"),
        "scheduler": stats, "parent": prof.result(),
    }
    print(f"[throughput] {name}: {len(run)} verified in {wall:.1f} s, steady {res['steady_s_per_candidate']} s/cand, "
          f"statuses {statuses}; median s per phase {json.dumps(phases)}; parent CPU "
          f"{res['parent']['parent_cpu_pct_of_one_core']}% of one core", file=sys.stderr, flush=True)
    return res


def markdown(res: dict[str, Any]) -> str:
    lines = [f"Verification throughput on {res['device']} ({res['n_gpus_visible']} GPU(s) visible; torch "
             f"{res['torch']}, triton {res['triton']}); Triton reference solutions of {res['tasks']} tasks, "
             f"every check on, compile baseline {'on' if res['compile_baseline'] else 'off'}.", "",
             "| phase | GPUs | jobs/GPU | spares/GPU | verified | skipped | wall s | cand/min | steady s/cand | steady cand/min | "
             "median latency s | host CPU busy % | host core-s/cand | parent CPU % of a core | statuses |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for p in res["phases"]:
        lines.append(f"| {p['phase']} | {len(p['gpus'])} | {p['jobs_per_gpu']} | {p.get('spares_per_gpu', '—')} | "
                     f"{p['verified']} | "
                     f"{p['skipped_deadline']} | {p['wall_s']} | {p['per_minute']} | {p['steady_s_per_candidate']} | "
                     f"{p['steady_per_minute']} | {p['median_verify_latency_s']} | {p.get('host_cpu_busy_pct', '—')} | "
                     f"{p.get('host_core_s_per_candidate', '—')} | {(p.get('parent') or {}).get('parent_cpu_pct_of_one_core', '—')} | "
                     f"{', '.join(f'{k}: {v}' for k, v in sorted(p['statuses'].items()))} |")
    for spec, scale in (res.get("scalings") or {}).items():
        lines += ["", f"Two-GPU scaling ({spec} steady cand/min ÷ {spec.replace('warm_2gpu', 'warm')}): "
                      f"**{scale:.2f}×** (goal 2× within 15%: ≥ 1.70)."]
    warm = next((p for p in res["phases"] if p["phase"].split(":")[0] == "warm"), None)
    if warm and warm.get("steady_s_per_candidate"):
        lines += ["", f"Steady state on one GPU (warm): **{warm['steady_s_per_candidate']} s per candidate** "
                      f"(goal < 2 s; KernelBench's harness: 6-7 s per Triton candidate on this H200)."]
    lines += ["", "Median seconds per candidate by phase (verdict timings):", "",
              "| phase | " + " | ".join(p["phase"] for p in res["phases"]) + " |",
              "|---|" + "---:|" * len(res["phases"])]
    keys = sorted({k for p in res["phases"] for k in p["median_phase_s"]})
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(str(p["median_phase_s"].get(k, "—")) for p in res["phases"]) + " |")
    bad = [x for p in res["phases"] for x in p["not_ok"]]
    if bad:
        lines += ["", "Non-ok verdicts (first few):"] + [f"- {b['task']}: {b['status']} ({b['reason']})" for b in bad[:10]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", type=int, default=60, help="candidates per phase (>= 50 for the issue)")
    ap.add_argument("--tasks", type=int, default=12, help="distinct level-1 tasks the candidates cycle through")
    ap.add_argument("--jobs", type=int, default=6, help="candidates verified at once per GPU")
    ap.add_argument("--spares", type=int, default=None,
                    help="warm spare processes kept per GPU (default 2 x --jobs: a spare takes ~5 s to start, "
                         "longer than the gap between two candidates at steady state)")
    ap.add_argument("--gpus", type=int, default=1, help="2: add a warm phase over two GPUs")
    ap.add_argument("--phase-budget-s", type=float, default=110.0, help="stop starting candidates after this")
    ap.add_argument("--compile-baseline", action="store_true",
                    help="also time torch.compile baselines (slow when cold: off by default to fit in 5 min)")
    ap.add_argument("--skip-cold", action="store_true", help="same as leaving `cold` out of --phases")
    ap.add_argument("--phases", default=None,
                    help="comma-separated, in order, from: cold, prime, warm, warm_2gpu, each optionally with "
                         ":tN (torch threads per worker process, AMDKV_WORKER_THREADS=N), :hostinputs (session 9's device-resident "
                         "trial inputs off: AMDKV_RESIDENT_INPUTS=0), :base (session 7's worker speed-ups off: "
                         "blocking sync, prebuilt Triton driver helper), :noseed / :seed (the prebuilt helper off / on: "
                         "AMDKV_SEED_TRITON_STUBS=0/1) "
                         "and/or :jN (N jobs per GPU "
                         "and 2N spares instead of --jobs; warm:j12 against warm_2gpu tells a host-wide limit "
                         "from a per-GPU one). `prime` verifies one "
                         "candidate per task (untimed for throughput) so that the warm phases find their "
                         "references cached without a full cold phase. Default: cold,warm (+warm_2gpu with "
                         "--gpus 2)")
    args = ap.parse_args()

    phases = args.phases.split(",") if args.phases else ["cold", "warm"] + (["warm_2gpu"] if args.gpus >= 2 else [])
    if args.skip_cold and "cold" in phases:
        phases.remove("cold")
    unknown = [p for p in phases if p.split(":")[0] not in ("cold", "prime", "warm", "warm_2gpu")
               or any(not ((o[:1] in ("t", "j") and o[1:].isdigit()) or o in SWITCHED_OFF or o in SWITCHED_ON)
                      for o in p.split(":")[1:])]
    if unknown:
        print(f"unknown phase(s) {unknown}; use cold, prime, warm, warm_2gpu, each optionally with "
              ":tN (torch threads per worker), :jN (jobs per GPU), :base, :noseed, :hostinputs and/or :seed", file=sys.stderr)
        return 2

    import torch
    import triton

    if not torch.cuda.is_available():
        print("throughput needs a GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="amdkv-throughput-"))
    os.environ["AMDKV_CACHE_DIR"] = str(work / "cache")          # empty reference cache: cold
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(work / "inductor")  # fresh inductor cache
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")        # parent-side; workers get their own
    n_visible = torch.cuda.device_count()
    pairs = make_candidates(args.candidates, args.tasks, work)
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "n_gpus_visible": n_visible,
                           "torch": torch.__version__, "triton": triton.__version__,
                           "tasks": len({t.id for t, _ in pairs}), "candidates": args.candidates,
                           "compile_baseline": args.compile_baseline, "phases": []}
    second: list[tuple[Any, str]] = []  # a second copy of the candidates, for phases that run more at once

    def more_candidates() -> list[tuple[Any, str]]:
        if not second:
            (work / "second").mkdir(exist_ok=True)
            second.extend(make_candidates(args.candidates, args.tasks, work / "second"))
        return pairs + second

    try:
        for spec in phases:
            # `phase:tN` runs that phase with AMDKV_WORKER_THREADS=N (torch threads per worker);
            # `phase:jN` with N jobs per GPU (and 2N spares) instead of --jobs
            phase, *opts = spec.split(":")
            threads = next((o[1:] for o in opts if o.startswith("t")), "")
            jobs = int(next((o[1:] for o in opts if o.startswith("j")), args.jobs))
            if threads:
                os.environ["AMDKV_WORKER_THREADS"] = threads
            else:
                os.environ.pop("AMDKV_WORKER_THREADS", None)
            for var, value in phase_environment(opts).items():  # `phase:base`, `:hostinputs`, `:seed`
                if value is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = value
            common = dict(jobs=jobs, budget_s=args.phase_budget_s, compile_baseline=args.compile_baseline,
                          spares=args.spares or 2 * jobs)
            if phase == "prime":
                firsts = list({t.id: (t, c) for t, c in reversed(pairs)}.values())
                res["prime"] = run_phase("prime", firsts, gpus=list(range(min(2, n_visible))),
                                         **{**common, "budget_s": 10 * args.phase_budget_s})
            elif phase == "warm_2gpu":
                if n_visible < 2:
                    res["two_gpu_error"] = f"warm_2gpu asked for, {n_visible} GPU visible"
                    continue
                # twice the candidates so each GPU gets as many as the one-GPU phase had
                res["phases"].append(run_phase(spec, more_candidates(), gpus=[0, 1], **common))
                same = spec.replace("warm_2gpu", "warm", 1)  # the one-GPU phase with the same options
                one = next((p for p in res["phases"] if p["phase"] == same), None)
                w1 = one.get("steady_per_minute") if one else None
                w2 = res["phases"][-1].get("steady_per_minute")
                if w1 and w2:
                    res.setdefault("scalings", {})[spec] = w2 / w1
                    res["scaling"] = w2 / w1
            else:  # more jobs than --jobs: more candidates, so the phase still runs past its ramp-up
                res["phases"].append(run_phase(spec, more_candidates() if jobs > args.jobs else pairs,
                                               gpus=[0], **common))
            # after every phase: a run cut short keeps the phases it finished
            write_report(out, "throughput", res, markdown)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(write_report(out, "throughput", res, markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
