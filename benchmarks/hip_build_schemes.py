"""Compile time of the HIP build schemes (lean, split, full) on every reference HIP solution.

    python benchmarks/hip_build_schemes.py --out DIR [--schemes lean,split] [--task l1_relu ...]

Compile only (nvcc for sm_90 + the host C++ compiler, no link: a machine without a GPU has no
libcudart/libtorch_cuda to link against), so it runs on the CPU dev machine and measures what a
cold build costs the host, which is what the H200 host pays per new HIP candidate. The host units'
precompiled header is built once before timing (it is shared by every candidate). Per solution:
whether the scheme can be set up (`lean_parts`/`bound_function_declarations` refuse what they
cannot split soundly), whether every unit compiled, and the wall seconds (units in parallel, 2 jobs).
Writes `schemes.json` and `schemes.md` under --out and prints the table. Platform cuda, compile
only: never an AMD number, and not a GPU run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from amdkv.tasks.builtin import BUILTIN_ROOT  # noqa: E402

CI_INCLUDE = REPO / "tests" / "data" / "hip_ci_include"   # headers this CPU machine's CUDA lacks


def main() -> int:
    from amdkv.verify.backends import hip_build, hip_pch, hip_toolchain
    from amdkv.verify.backends.hip import capture_hip_sources
    from amdkv.verify.backends.hip_units import SplitUnavailable, extension_units

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--schemes", default="lean,split")
    ap.add_argument("--task", action="append", default=[], help="reference solutions to time (default: all)")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    schemes = args.schemes.split(",")
    tc = hip_toolchain.nvcc_toolchain(args.arch)
    extra = [f"-I{CI_INCLUDE}"]
    t0 = time.monotonic()
    hip_pch.host_pch(tc, extra)
    print(f"precompiled header ready in {time.monotonic() - t0:.1f} s", flush=True)
    sols = sorted((BUILTIN_ROOT / "solutions" / "hip").glob("*.py"))
    if args.task:
        sols = [p for p in sols if p.stem in args.task]
    rows = []
    for path in sols:
        capture = capture_hip_sources(path)
        caps = capture.report.captures if capture.report else []
        if not caps:
            rows.append({"task": path.stem, "error": capture.worker_error or "no capture"})
            continue
        row: dict = {"task": path.stem}
        for scheme in schemes:
            try:
                extension_units(caps[0], "cuda", scheme)
            except SplitUnavailable as exc:
                row[scheme] = {"available": False, "why": str(exc)}
                print(f"{path.stem:<34} {scheme:<6} unavailable: {exc}", flush=True)
                continue
            t = time.monotonic()
            res = hip_build.compile_only(caps[0], tc, scheme=scheme, extra_includes=(str(CI_INCLUDE),))
            secs = round(time.monotonic() - t, 1)
            errors = {u: e[:400] for u, e in res if e}
            row[scheme] = {"available": True, "ok": not errors, "seconds": secs, "units": [u for u, _ in res],
                           "errors": errors}
            print(f"{path.stem:<34} {scheme:<6} {'ok' if not errors else 'FAILED'} {secs:6.1f} s "
                  f"{list(errors)[:3] if errors else ''}", flush=True)
        rows.append(row)
    summary = {}
    for scheme in schemes:
        got = [r[scheme] for r in rows if scheme in r]
        ok = [g["seconds"] for g in got if g.get("ok")]
        summary[scheme] = {"solutions": len(got), "available": sum(g["available"] for g in got),
                           "compiled": len(ok), "median_s": statistics.median(ok) if ok else None,
                           "mean_s": round(statistics.mean(ok), 1) if ok else None}
    result = {"platform": "cuda (nvcc compile only, no GPU)", "arch": args.arch, "toolchain": tc.version,
              "schemes": schemes, "summary": summary, "rows": rows}
    (out / "schemes.json").write_text(json.dumps(result, indent=1))
    lines = ["| scheme | solutions | can be set up | compiled | median s | mean s |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {s} | {v['solutions']} | {v['available']} | {v['compiled']} | {v['median_s']} | {v['mean_s']} |"
              for s, v in summary.items()]
    (out / "schemes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
