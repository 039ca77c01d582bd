"""Markdown table of the reference solutions' verdicts from an `amdkv eval` results.jsonl made with
benchmarks/eval_samples.py (sample 1 of each task is the reference solution)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path


def fmt(x: object, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def main(path: str) -> int:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    refs = sorted((r for r in rows if r["sample_index"] == 1), key=lambda r: r["task_id"])
    platforms = sorted({r["verdict"].get("platform") or "?" for r in refs})
    devices = sorted({r["verdict"].get("device") or "?" for r in refs})
    print(f"## Bundled Triton reference solutions — platform {', '.join(platforms)} ({', '.join(devices)})\n")
    print("Not AMD numbers: measured on an NVIDIA GPU (platform `cuda`).\n" if "cuda" in platforms else "")
    print("| task | status | reason | speedup vs eager | vs torch.compile | sol | timing method | perf cases |")
    print("|---|---|---|---|---|---|---|---|")
    counts: dict[str, int] = {}
    sp = []
    for r in refs:
        v = r["verdict"]
        counts[v["status"]] = counts.get(v["status"], 0) + 1
        methods = sorted({c.get("timing_method") for c in v.get("cases", []) if c.get("timing_method")})
        n_perf = sum(1 for c in v.get("cases", []) if "performance" in c.get("tags", []))
        if v.get("speedup"):
            sp.append(v["speedup"])
        print(f"| {r['task_id']} | {v['status']} | {v.get('reason') or ''} | {fmt(v.get('speedup'))} | "
              f"{fmt(v.get('speedup_compile'))} | {fmt(v.get('sol'), '.3f')} | {', '.join(methods) or '-'} | {n_perf} |")
    print()
    print("Totals: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    if sp:
        g = math.exp(sum(math.log(s) for s in sp) / len(sp))
        print(f"Geometric-mean speedup vs eager over {len(sp)} timed reference solutions: {g:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
