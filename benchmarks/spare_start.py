"""Spare start-up and verification throughput: exec'd workers vs workers forked by the fork server.

Two measurements per start method (AMDKV_SPARE_START=exec | fork), on whatever platform
`--device` picks (cpu here: the Triton interpreter):
  starts     : --spares spares started at once and waited for (READY); wall seconds and the
               host's busy core-seconds per spare (from /proc/stat: a forked worker's CPU is not
               this process's child time, so process rusage cannot see it)
  throughput : the bundled Triton solutions of the first --tasks level-1 tasks, repeated to
               --candidates, verified with --jobs at once (references cached by a first pass that
               is not counted); candidates per minute and host core-seconds per candidate

    python benchmarks/spare_start.py --out spare_out                 # cpu, both methods
    python benchmarks/spare_start.py --out spare_out --device cuda   # on a GPU machine

Writes spare_start.json and spare_start.md to --out and prints the table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_cpu import busy_core_seconds, host_cpu_ticks  # noqa: E402
from report_files import write_report  # noqa: E402
from throughput import make_candidates  # noqa: E402


def measure_starts(method: str, device: str, n: int, sandbox: str = "auto") -> dict[str, Any]:
    from amdkv.config import VerifierConfig
    from amdkv.verify.platform import detect_platform
    from amdkv.verify.pool import Spare

    platform = detect_platform(device)
    if method == "fork":  # the server's own start is paid once per process: not a spare's cost
        from amdkv.verify import fork_server

        env = {"TRITON_INTERPRET": "1"} if platform.interpreter else {}
        fork_server.shared(env)
    cpu0, t0 = host_cpu_ticks(), time.monotonic()
    config = VerifierConfig.from_env(device=device, sandbox=sandbox)
    spares = [Spare(platform, config, start=method) for _ in range(n)]
    for s in spares:
        s.wait_ready()
    wall, cpu1 = time.monotonic() - t0, host_cpu_ticks()
    for s in spares:
        s.proc.close_idle()
        s.cleanup()
    core_s = busy_core_seconds(cpu0, cpu1)
    return {"spares": n, "wall_s": round(wall, 2),
            "core_s_per_spare": round(core_s / n, 3) if core_s is not None else None}


def measure_throughput(method: str, device: str, n_candidates: int, n_tasks: int, jobs: int,
                       sandbox: str = "auto") -> dict[str, Any]:
    from amdkv.verify.verifier import Verifier

    work = Path(tempfile.mkdtemp(prefix="amdkv-spare-start-"))
    try:
        pairs = make_candidates(n_candidates, n_tasks, work)
        firsts = list({t.id: (t, c) for t, c in pairs}.values())
        os.environ["AMDKV_SPARE_START"] = method
        # verdict cache off: this measures verification, not cache reads
        with Verifier(device, jobs=jobs, spares=jobs, compile_baseline=False, verdict_cache=False,
                      spare_start=method, sandbox=sandbox) as verifier:
            verifier.verify_many(firsts)  # references cached, spares warm: not counted
            cpu0, t0 = host_cpu_ticks(), time.monotonic()
            verdicts = verifier.verify_many(pairs)
            wall, cpu1 = time.monotonic() - t0, host_cpu_ticks()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    statuses: dict[str, int] = {}
    for v in verdicts:
        statuses[v.status] = statuses.get(v.status, 0) + 1
    core_s = busy_core_seconds(cpu0, cpu1)
    lat = [v.timings.get("total_s") for v in verdicts if v.timings.get("total_s")]
    return {"candidates": len(verdicts), "jobs": jobs, "wall_s": round(wall, 2),
            "per_minute": round(len(verdicts) / wall * 60, 2),
            "core_s_per_candidate": round(core_s / len(verdicts), 3) if core_s is not None else None,
            "median_latency_s": round(statistics.median(lat), 3) if lat else None, "statuses": statuses}


def markdown(res: dict[str, Any]) -> str:
    lines = [f"Spare start-up and throughput on {res['host']} ({res['cores']} cores), device {res['device']}, "
             f"torch {res['torch']}, triton {res['triton']}.", "",
             "| start | spares at once | wall s to all READY | host core-s per spare | candidates | jobs | "
             "cand/min | host core-s per candidate | median latency s | statuses |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m, r in res["methods"].items():
        s, t = r["starts"], r["throughput"]
        lines.append(f"| {m} | {s['spares']} | {s['wall_s']} | {s['core_s_per_spare']} | {t['candidates']} | "
                     f"{t['jobs']} | {t['per_minute']} | {t['core_s_per_candidate']} | {t['median_latency_s']} | "
                     f"{', '.join(f'{k}: {v}' for k, v in sorted(t['statuses'].items()))} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", default="exec,fork")
    ap.add_argument("--spares", type=int, default=4, help="spares started at once for the start-up measurement")
    ap.add_argument("--candidates", type=int, default=24)
    ap.add_argument("--tasks", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    import platform as pyplatform

    import torch
    import triton

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {"host": pyplatform.node(), "cores": os.cpu_count(), "device": args.device,
                           "torch": torch.__version__, "triton": triton.__version__, "methods": {}}
    for method in args.methods.split(","):
        print(f"[spare_start] {method}: starts", file=sys.stderr, flush=True)
        starts = measure_starts(method, args.device, args.spares)
        print(f"[spare_start] {method}: throughput over {args.candidates} candidates", file=sys.stderr, flush=True)
        res["methods"][method] = {"starts": starts, "throughput": measure_throughput(
            method, args.device, args.candidates, args.tasks, args.jobs)}
        write_report(out, "spare_start", res, markdown)
    print(write_report(out, "spare_start", res, markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
