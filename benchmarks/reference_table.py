"""Markdown table of the bundled reference solutions' verdicts (docs/gpu_check.md).

    python benchmarks/reference_table.py FILE.jsonl [FILE.jsonl ...]

Each file is either `amdkv demo --out` verdicts (one verdict per line) or an `amdkv eval`
results.jsonl made with benchmarks/eval_samples.py (sample 1 of each task is the reference
solution). With several files, a task's verdict in a later file replaces an earlier one (a re-run
after a fix), and the table says which run each row comes from.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def fmt(x: object, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def reference_verdicts(path: Path) -> list[dict[str, Any]]:
    """The reference-solution verdicts in one file, whichever of the two formats it is."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if rows and "verdict" in rows[0]:
        return [r["verdict"] | {"task_id": r["task_id"]} for r in rows if r.get("sample_index") == 1]
    return rows


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    by_task: dict[str, tuple[int, dict[str, Any]]] = {}
    for run, p in enumerate(paths, 1):
        for v in reference_verdicts(Path(p)):
            by_task[v["task_id"]] = (run, v)
    refs = [by_task[t] for t in sorted(by_task)]
    platforms = sorted({v.get("platform") or "?" for _, v in refs})
    devices = sorted({v.get("device") or "?" for _, v in refs})
    print(f"## Bundled Triton reference solutions — platform {', '.join(platforms)} ({', '.join(devices)})\n")
    if "cuda" in platforms:
        print("Not AMD numbers: measured on an NVIDIA GPU (platform `cuda`).\n")
    multi = len(paths) > 1
    print("| task | status | reason | speedup vs eager | vs torch.compile | sol | timing method | perf cases |"
          + (" run |" if multi else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if multi else ""))
    counts: dict[str, int] = {}
    eager, compiled = [], []
    for run, v in refs:
        counts[v["status"]] = counts.get(v["status"], 0) + 1
        methods = sorted({c.get("timing_method") for c in v.get("cases", []) if c.get("timing_method")})
        n_perf = sum(1 for c in v.get("cases", []) if "performance" in c.get("tags", []))
        if v.get("speedup"):
            eager.append(v["speedup"])
        if v.get("speedup_compile"):
            compiled.append(v["speedup_compile"])
        print(f"| {v['task_id']} | {v['status']} | {v.get('reason') or ''} | {fmt(v.get('speedup'))} | "
              f"{fmt(v.get('speedup_compile'))} | {fmt(v.get('sol'), '.3f')} | {', '.join(methods) or '-'} | {n_perf} |"
              + (f" {run} |" if multi else ""))
    print()
    print("Totals: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    if eager:
        print(f"\nGeometric-mean speedup vs eager over {len(eager)} timed reference solutions: {geomean(eager):.2f}"
              f"; slower than eager: {sum(s < 1 for s in eager)}.")
    if compiled:
        print(f"Geometric-mean speedup vs torch.compile over {len(compiled)}: {geomean(compiled):.2f}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
