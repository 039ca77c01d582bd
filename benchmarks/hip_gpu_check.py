"""One command for an NVIDIA GPU (H200): verify every reference HIP solution and the broken HIP set.

    python benchmarks/hip_gpu_check.py --out hip_gpu_out [--device cuda] [--jobs 8] [--budget-s 330]

Writes `results.jsonl` (one verdict per line as it arrives, with `expected_status`; the warm pass
in `results_warm.jsonl`),
`hip_gpu_check.md` (status, speedup vs eager, timing method) and `throughput.json` under --out.
Throughput = fresh HIP candidates verified per minute, measured twice: cold (empty build cache:
every candidate compiles with nvcc) and warm (same candidates again, cache hit). A bad candidate
never stops the run (each verification is guarded); the wall budget keeps it under ~6 minutes:
candidates not started before the budget runs out are recorded as `skipped`.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from amdkv.config import VerifierConfig  # noqa: E402
from amdkv.reports.jsonl import JsonlAppender  # noqa: E402
from amdkv.tasks.builtin import BUILTIN_ROOT, task_path  # noqa: E402

SOL_DIR = BUILTIN_ROOT / "solutions" / "hip"
BROKEN = REPO / "tests" / "data" / "hip_broken"


def jobs_list() -> list[dict]:
    items = [{"kind": "reference", "task": p.stem, "candidate": str(p), "expected_status": "ok"}
             for p in sorted(SOL_DIR.glob("*.py"))]
    manifest = json.loads((BROKEN / "manifest.json").read_text())
    broken = [{"kind": "broken", "task": e["task"], "candidate": str(BROKEN / e["candidate"]),
               "expected_status": e["status_cuda"]} for e in manifest]
    # Interleaved (a broken candidate after every two or three references), so that a run cut by
    # its wall budget still covers both kinds: on the H200 in session 2 the broken set came last
    # and none of it started.
    out: list[dict] = []
    step = max(1, len(items) // max(1, len(broken)))
    for i, b in enumerate(broken):
        out += items[i * step:(i + 1) * step] + [b]
    out += items[len(broken) * step:]
    return out


def verify_one(verifier, item: dict) -> dict:
    t0 = time.monotonic()
    try:
        v = verifier.verify(task_path(item["task"]), item["candidate"], language="hip")
        d = v.to_dict()
    except Exception as exc:  # noqa: BLE001 - one bad candidate never stops the run
        d = {"status": "harness_exception", "reason": type(exc).__name__,
             "diagnostics": traceback.format_exc()[-3000:]}
    d.update(kind=item["kind"], task_id=item["task"], candidate=Path(item["candidate"]).name,
             expected_status=item["expected_status"], wall_s=round(time.monotonic() - t0, 2))
    return d


SYSTEMATIC = {"harness_exception", "infra_error"}


def run_pass(items: list[dict], device: str, jobs: int, deadline: float, timeout: float, log_path: Path,
             fail_fast: int = 4) -> tuple[list[dict], float]:
    """Verify `items` with `jobs` concurrent verifications; returns (rows, wall seconds). Each row is
    also appended to `log_path` as it arrives (a run cut short keeps what it finished).

    Fail fast: when the first `fail_fast` reference solutions all end in a harness exception, an
    infra error or a compile error, the toolchain (not the candidates) is broken: later items are
    recorded as `skipped` (reason `aborted_systematic_failure`) instead of spending GPU time."""
    from amdkv.verify import Verifier

    rows: list[dict] = []
    first_refs: list[str] = []
    state = {"abort": False}
    t0 = time.monotonic()

    def skipped(it: dict, reason: str) -> dict:
        return {**it, "task_id": it["task"], "candidate": Path(it["candidate"]).name,
                "status": "skipped", "reason": reason}

    with Verifier(device, spares=jobs, timeout=timeout, compile_baseline=False, verdict_cache=False) as verifier:

        def one(it: dict) -> dict:
            if state["abort"]:
                return skipped(it, "aborted_systematic_failure")
            if time.monotonic() >= deadline:
                return skipped(it, "wall_budget")
            return verify_one(verifier, it)

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool, \
                JsonlAppender(log_path, fresh=True, allow_nan=True) as log:
            futs = [pool.submit(one, it) for it in items]
            for f in concurrent.futures.as_completed(futs):
                row = f.result()
                rows.append(row)
                log.append(row)
                if row["kind"] == "reference" and row.get("status") != "skipped" and len(first_refs) < fail_fast:
                    first_refs.append(row.get("status"))
                    if len(first_refs) == fail_fast and all(s in SYSTEMATIC | {"compile_error"} for s in first_refs):
                        state["abort"] = True
                        print(f"ABORT: the first {fail_fast} reference solutions all failed ({first_refs}); "
                              f"see their diagnostics in results.jsonl", flush=True)
                same = row.get("status") == row["expected_status"]
                print(f"{'ok  ' if same else 'DIFF'} {row['candidate']:<40} expected {row['expected_status']:<14} "
                      f"got {row.get('status')} ({row.get('reason')}) {row.get('wall_s', '')} s", flush=True)
                if same is False and row.get("diagnostics") and row["kind"] == "reference":
                    print("   " + str(row["diagnostics"])[-600:].replace("\n", "\n   "), flush=True)
    return rows, time.monotonic() - t0


def _fmt(x, spec: str) -> str:
    return format(x, spec) if isinstance(x, (int, float)) else "—"


def table(rows: list[dict]) -> str:
    lines = ["| kind | task | candidate | expected | status | reason | speedup vs eager | timing method | build s | "
             "build scheme |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: (r["kind"], r["task_id"], r["candidate"])):
        methods = sorted({c.get("timing_method") for c in r.get("cases", []) if c.get("timing_method")})
        lines.append(f"| {r['kind']} | {r['task_id']} | {r['candidate']} | {r['expected_status']} | "
                     f"{r.get('status')} | {r.get('reason') or ''} | {_fmt(r.get('speedup'), '.2f')} | "
                     f"{', '.join(methods) or '—'} | {_fmt((r.get('timings') or {}).get('hip_build_s'), '.1f')} | "
                     f"{','.join(str(x) for x in ((r.get('env') or {}).get('hip_build') or {}).get('scheme', [])) or '—'} |")
    agree = sum(r.get("status") == r["expected_status"] for r in rows)
    lines.append(f"\n{agree}/{len(rows)} statuses as expected (platform cuda; never AMD numbers).")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--jobs", type=int, default=min(8, max(1, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--budget-s", type=float, default=330.0, help="wall budget for both passes")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-candidate run timeout")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # A private cache root: the cold pass really is cold; the warm pass reuses its builds and references.
    cache = Path(tempfile.mkdtemp(prefix="amdkv-hipcheck-"))
    os.environ["AMDKV_CACHE_DIR"] = str(cache)
    items = jobs_list()
    start = time.monotonic()
    deadline = start + args.budget_s * 0.8
    print(f"cold pass: {len(items)} candidates, {args.jobs} jobs", flush=True)
    cold_rows, cold_s = run_pass(items, args.device, args.jobs, deadline, args.timeout, out / "results.jsonl")
    (out / "hip_gpu_check.md").write_text(table(cold_rows) + "\n")
    done_cold = [r for r in cold_rows if r.get("status") != "skipped"]
    warm_items = [it for it in items if Path(it["candidate"]).name in {r["candidate"] for r in done_cold}]
    warm_deadline = start + args.budget_s
    print(f"warm pass (build cache hot): {len(warm_items)} candidates", flush=True)
    warm_rows, warm_s = run_pass(warm_items, args.device, args.jobs, warm_deadline, args.timeout,
                                 out / "results_warm.jsonl")
    done_warm = [r for r in warm_rows if r.get("status") != "skipped"]
    thr = {"jobs": args.jobs, "cold": {"candidates": len(done_cold), "wall_s": round(cold_s, 1),
                                       "per_minute": round(60 * len(done_cold) / cold_s, 2) if cold_s else None},
           "warm": {"candidates": len(done_warm), "wall_s": round(warm_s, 1),
                    "per_minute": round(60 * len(done_warm) / warm_s, 2) if warm_s else None},
           "warm_status_changes": sorted(r["candidate"] for r in done_warm
                                         if r.get("status") != next((c.get("status") for c in done_cold
                                                                     if c["candidate"] == r["candidate"]), None))}
    schemes = collections.Counter(s for r in done_cold for s in ((r.get("env") or {}).get("hip_build") or {})
                                  .get("scheme", []) if s)
    thr["schemes_cold"] = dict(schemes)
    thr["lean_build"] = VerifierConfig.from_env().hip_lean_build  # the setting the run's verifier read
    (out / "throughput.json").write_text(json.dumps(thr, indent=1))
    print(table(cold_rows))
    print(f"\nthroughput ({args.jobs} jobs): cold {thr['cold']['per_minute']} candidates/min "
          f"({len(done_cold)} in {cold_s:.0f} s), warm {thr['warm']['per_minute']} candidates/min "
          f"({len(done_warm)} in {warm_s:.0f} s)")
    print(f"schemes (cold builds, lean build {'on' if thr['lean_build'] else 'off'}): "
          + (", ".join(f"{k} {v}" for k, v in schemes.most_common()) or "none"))
    shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
