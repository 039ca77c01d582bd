"""`amdkv eval` in-process against `amdkv eval --verifier-url` on an `amdkv serve` service, and the
service's verdict cache on a repeated batch. One call does everything:

  prime          one candidate per task through `amdkv eval` in-process (untimed): both timed
                 passes then find the same reference cache (a fresh AMDKV_CACHE_DIR under --out)
  inprocess      `amdkv eval SUITE --samples A --device D --jobs J` (candidates set A, fresh)
  served         `amdkv serve --device D --jobs J` started on loopback (a subprocess, --port 0),
                 then `amdkv eval SUITE --samples B --verifier-url URL` (set B, fresh)
  served_cached  the same set B again into a new --out folder: every verdict from the service's
                 verdict cache

Candidates: the bundled Triton solutions of the first --tasks level-1 tasks, each copy made
distinct by a comment line naming the set, its index and this run (as benchmarks/throughput.py
does), --n per set. The verdict cache is on in every pass; fresh candidates make the first two
passes measure verification, not the cache. torch.compile baselines are off unless
--compile-baseline (AMDKV_COMPILE_BASELINE=0, read by both the in-process verifier and the
service through VerifierConfig.from_env).

Measured per pass, from outside the eval (a thread polls OUT/results.jsonl every 20 ms):
  wall_s      the whole `amdkv eval` command (interpreter start, suite load, reports included)
  batch_s     results.jsonl created (eval opens it right before verifying) -> its last line
  per_min     n / batch_s x 60 (the in-process pass includes its verifier's start-up here, the
              served pass does not: the service's start-up is reported apart, service_startup_s)
  steady      completions after the first 20% per minute (start-up and ramp-up excluded on both
              sides: the fair comparison of verification through HTTP against in-process)
Goals (docs/serve.md): served steady >= 0.90 x inprocess steady (batch and wall ratios given
too); served_cached per_min >= 20 x served per_min (both batches start with the service warm).

    python benchmarks/serve_vs_inprocess.py --out sv_out                      # GPU: 60 per set, --jobs 6
    python benchmarks/serve_vs_inprocess.py --out sv_out --device cpu --n 6 --tasks 2 --jobs 2

Writes OUT/serve_vs_inprocess.json and .md (after each pass), prints the table last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_files import write_report  # noqa: E402

STEM = "serve_vs_inprocess"


def candidate_sets(n: int, n_tasks: int, run: str) -> tuple[list[str], dict[str, list[tuple[str, str]]]]:
    """Task ids, and per set name a list of (task_id, source), each source distinct."""
    from amdkv.tasks.builtin import solution_path, task_files

    ids = sorted(p.stem for p in task_files() if p.stem.startswith("l1_") and solution_path(p.stem, "triton"))[:n_tasks]
    if not ids:
        raise SystemExit("no bundled level-1 Triton solutions found")
    sets: dict[str, list[tuple[str, str]]] = {}
    for name, count in (("prime", len(ids)), ("inprocess", n), ("served", n)):
        sets[name] = [(ids[i % len(ids)], f"# serve_vs_inprocess {name} {i} run {run}\n"
                       + solution_path(ids[i % len(ids)], "triton").read_text()) for i in range(count)]
    return ids, sets


def write_samples(path: Path, pairs: list[tuple[str, str]]) -> None:
    by_task: dict[str, list[str]] = {}
    for task_id, source in pairs:
        by_task.setdefault(task_id, []).append(source)
    path.write_text("".join(json.dumps({"task_id": t, "samples": s}) + "\n" for t, s in by_task.items()))


class ResultsWatcher:
    """Times the lines of a results.jsonl as they appear (polled every 20 ms)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created_at: float | None = None
        self.line_times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "ResultsWatcher":
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._look()
            time.sleep(0.02)
        self._look()

    def _look(self) -> None:
        try:
            lines = self.path.read_bytes().count(b"\n")
        except FileNotFoundError:
            return
        now = time.monotonic()
        if self.created_at is None:
            self.created_at = now
        self.line_times += [now] * (lines - len(self.line_times))

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def run_eval(name: str, suite: str, samples: Path, out: Path, env: dict[str, str], extra: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "amdkv.cli", "eval", suite, "--samples", str(samples), "--out", str(out), "--json",
           *extra]
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with ResultsWatcher(out / "results.jsonl") as watch:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - t0
    (out / "eval.stderr.txt").write_text(proc.stderr)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"[{name}] amdkv eval failed (rc {proc.returncode}): {proc.stderr[-3000:]}")
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    statuses: dict[str, int] = {}
    for rec in records:
        statuses[rec["verdict"]["status"]] = statuses.get(rec["verdict"]["status"], 0) + 1
    n = len(records)
    times = watch.line_times
    batch = (times[-1] - watch.created_at) if times and watch.created_at else None
    steady = times[max(1, n // 5):]
    steady_rate = (len(steady) - 1) / (steady[-1] - steady[0]) * 60 if len(steady) >= 2 and steady[-1] > steady[0] else None
    res = {"pass": name, "n": n, "rc": proc.returncode, "wall_s": round(wall, 2),
           "batch_s": round(batch, 3) if batch else None,
           "first_result_s": round(times[0] - watch.created_at, 3) if times and watch.created_at else None,
           "per_min": round(n / batch * 60, 2) if batch else None,
           "steady_per_min": round(steady_rate, 2) if steady_rate else None,
           "wall_per_min": round(n / wall * 60, 2), "statuses": statuses,
           "cache_hits": sum(bool(r["verdict"].get("cache_hit")) for r in records),
           "platform": records[0]["verdict"].get("platform") if records else None,
           "device": records[0]["verdict"].get("device") if records else None}
    print(f"[{STEM}] {name}: {n} verdicts, batch {res['batch_s']} s ({res['per_min']}/min, steady "
          f"{res['steady_per_min']}/min), eval wall {res['wall_s']} s, statuses {statuses}, cache hits "
          f"{res['cache_hits']}", file=sys.stderr, flush=True)
    return res


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def summarise(res: dict[str, Any]) -> None:
    passes = {p["pass"]: p for p in res["passes"]}
    inproc, served, cached = passes.get("inprocess"), passes.get("served"), passes.get("served_cached")
    if inproc and served:
        res["service_vs_inprocess"] = {k: ratio(served[k], inproc[k]) for k in ("per_min", "steady_per_min", "wall_per_min")}
    if served and cached:
        res["cached_vs_first"] = {k: ratio(cached[k], served[k]) for k in ("per_min", "wall_per_min")}


def markdown(res: dict[str, Any]) -> str:
    lines = [f"`amdkv eval` in-process vs through `amdkv serve` ({res['device']}, platform {res['platform']}; "
             f"{res['n']} fresh Triton candidates per set over {res['tasks']} level-1 tasks, --jobs {res['jobs']}, "
             f"compile baseline {'on' if res['compile_baseline'] else 'off'}; service start-up "
             f"{res.get('service_startup_s', '—')} s).", "",
             "| pass | verdicts | batch s | per min | steady per min | eval wall s | cache hits | statuses |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for p in res["passes"]:
        lines.append(f"| {p['pass']} | {p['n']} | {p['batch_s']} | {p['per_min']} | {p['steady_per_min']} | "
                     f"{p['wall_s']} | {p['cache_hits']} | "
                     f"{', '.join(f'{k}: {v}' for k, v in sorted(p['statuses'].items()))} |")
    svi, cvf = res.get("service_vs_inprocess"), res.get("cached_vs_first")
    if svi:
        ok = svi["steady_per_min"] is not None and svi["steady_per_min"] >= 0.9
        lines += ["", f"Service / in-process: **{svi['steady_per_min']}** by steady rate (goal ≥ 0.90: "
                      f"{'met' if ok else 'NOT met'}); by batch rate {svi['per_min']} (the in-process batch includes "
                      f"its verifier's start-up), by eval wall {svi['wall_per_min']}."]
    if cvf:
        ok = cvf["per_min"] is not None and cvf["per_min"] >= 20
        lines += ["", f"Cached repeat / first served pass: **{cvf['per_min']}×** by batch rate (goal ≥ 20×: "
                      f"{'met' if ok else 'NOT met'}); by eval wall {cvf['wall_per_min']}× (the eval command's own "
                      "start-up dominates a cached pass)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=60, help="fresh candidates per timed set")
    ap.add_argument("--tasks", type=int, default=12, help="distinct level-1 tasks the candidates cycle through")
    ap.add_argument("--jobs", type=int, default=6, help="candidates verified at once (both sides)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "rocm"])
    ap.add_argument("--suite", default="builtin:all")
    ap.add_argument("--compile-baseline", action="store_true", help="also time torch.compile baselines")
    args = ap.parse_args()

    from amdkv.serve.server import ServeProcess
    from amdkv.verify.sandbox import with_package_on_path

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    run = uuid.uuid4().hex[:8]
    env = with_package_on_path(os.environ)
    env.update({"AMDKV_CACHE_DIR": str(out / f"cache-{run}"), "AMDKV_VERDICT_CACHE": "1",
                "AMDKV_COMPILE_BASELINE": "1" if args.compile_baseline else "0", "PYTHONUNBUFFERED": "1"})
    env.pop("AMDKV_SERVE_TOKEN", None)
    ids, sets = candidate_sets(args.n, args.tasks, run)
    for name, pairs in sets.items():
        write_samples(out / f"samples_{name}.jsonl", pairs)
    local = ["--device", args.device, "--jobs", str(args.jobs)]
    res: dict[str, Any] = {"n": args.n, "tasks": len(ids), "task_ids": ids, "jobs": args.jobs,
                           "compile_baseline": args.compile_baseline, "run": run, "passes": []}

    def record(p: dict[str, Any]) -> None:
        res["passes"].append(p)
        res["platform"], res["device"] = p["platform"], p["device"]
        summarise(res)
        write_report(out, STEM, res, markdown)

    prime = run_eval("prime", args.suite, out / "samples_prime.jsonl", out / f"prime-{run}", env, local)
    res["prime"] = prime
    record(run_eval("inprocess", args.suite, out / "samples_inprocess.jsonl", out / f"inprocess-{run}", env, local))
    t0 = time.monotonic()
    with ServeProcess("--port", "0", "--tasks", args.suite, *local,
                      log_path=out / f"serve-{run}.log", env=env) as server:
        res["service_startup_s"] = round(time.monotonic() - t0, 2)
        remote = ["--verifier-url", server.url]
        record(run_eval("served", args.suite, out / "samples_served.jsonl", out / f"served-{run}", env, remote))
        record(run_eval("served_cached", args.suite, out / "samples_served.jsonl", out / f"served_cached-{run}",
                        env, remote))
    md = write_report(out, STEM, res, markdown)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
