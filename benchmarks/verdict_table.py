"""Render verdict JSON-lines files as a markdown table (used for docs/gpu_check.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def fmt(x: object, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def render(path: Path) -> list[str]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        return [f"(no verdicts in {path.name})"]
    platforms = sorted({r.get("platform") or "?" for r in rows})
    devices = sorted({r.get("device") or "?" for r in rows})
    lines = [f"### {path.stem} — platform {', '.join(platforms)} ({', '.join(devices)})", "",
             "| task | candidate | status | reason | speedup vs eager | vs torch.compile | sol | timing method | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        methods = sorted({c.get("timing_method") for c in r.get("cases", []) if c.get("timing_method")})
        lines.append(f"| {r.get('task_id')} | {r.get('candidate', '-')} | {r['status']} | {r.get('reason') or ''} | "
                     f"{fmt(r.get('speedup'))} | {fmt(r.get('speedup_compile'))} | {fmt(r.get('sol'), '.3f')} | "
                     f"{', '.join(methods) or '-'} | {fmt(r.get('timings', {}).get('total_s'), '.1f')} |")
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), ""]
    return lines


def main(argv: list[str]) -> int:
    out = []
    for arg in argv:
        p = Path(arg)
        if p.is_file():
            out += render(p)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
