"""How long a HIP candidate that does not compile waits for its `compile_error` (issue 20's goal: <= 15 s).

    python benchmarks/hip_compile_error.py --out DIR [--candidate PATH ...] [--repeat N]

Each candidate (default: the broken set's compile errors, `tests/data/hip_broken/compile_*.py`) is
captured once, then built cold, with an empty build cache each time, through the verifier's own entry
points:
- `cuda`: `hip_build.build_capture` with nvcc for sm_90 (split then full), and again with the lean
  scheme first (`lean`); what the H200 host pays before a non-compiling candidate's verdict. The host
  units' precompiled header is built once before timing (shared by every candidate, as on a GPU host).
- `cuda_spec`: the same with `VerifierConfig.hip_speculative_full` (the full build beside the split).
- `gfx942`: `amd.compile.verify_hip_compile_only` with hipcc 7 (the sid chroot, `make toolchain-hip`):
  the AMD compiler's verdict, compile only (no AMD GPU here), its torch PCH built once before timing.
Rows give the wall seconds, the scheme that answered and the first error line. Writes
`compile_error.json` and `compile_error.md` under --out and prints the table. Not a GPU run; the
gfx942 row is an AMD compiler's time on this host, never an AMD GPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BROKEN = REPO / "tests" / "data" / "hip_broken"
CI_INCLUDE = REPO / "tests" / "data" / "hip_ci_include"   # headers this CPU machine's CUDA lacks


def _first_error_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if "error" in line:
            return line.strip()[:160]
    return (text or "").strip().splitlines()[0][:160] if text else ""


def _cold(cache: Path) -> None:
    """Empty the build cache but for the host precompiled header (`pch/`), which a GPU host builds once."""
    for child in cache.iterdir():
        if child.name != "pch":
            shutil.rmtree(child) if child.is_dir() else child.unlink()


def _time_cuda(capture: dict[str, Any], setting: str, cache: Path) -> dict[str, Any]:
    from amdkv.verify.backends import hip_build, hip_toolchain

    _cold(cache)
    per_scheme: dict[str, float] = {}
    build_units = hip_build._build_units

    def timed_build_units(units: Any, scheme: str, *a: Any, **kw: Any) -> Any:  # seconds of each scheme tried
        t = time.monotonic()
        try:
            return build_units(units, scheme, *a, **kw)
        finally:
            per_scheme[scheme] = round(time.monotonic() - t, 1)

    hip_build._build_units = timed_build_units
    try:
        t = time.monotonic()
        how = {"lean": True} if setting == "cuda_lean" else {"speculative": True} if setting == "cuda_spec" else {}
        res = hip_build.build_capture(capture, hip_toolchain.nvcc_toolchain("sm_90"), cache_dir=cache, **how)
        secs = time.monotonic() - t
    finally:
        hip_build._build_units = build_units
    return {"seconds": round(secs, 1), "ok": res.ok, "scheme": res.scheme, "per_scheme_s": per_scheme,
            "fallback": (res.fallback_reason or "")[:300], "error": _first_error_line(res.error)}


def _time_gfx942(candidate: Path, task: Path) -> dict[str, Any]:
    from amdkv.verify.backends.hip import verify_hip_compile_only

    with tempfile.TemporaryDirectory(prefix="amdkv-ce-hip-") as cold:  # hipcc's result cache, empty
        os.environ["AMDKV_HIP_CACHE_DIR"] = cold
        t = time.monotonic()
        v = verify_hip_compile_only(task, candidate, archs=("gfx942",))
        secs = time.monotonic() - t
    del os.environ["AMDKV_HIP_CACHE_DIR"]
    return {"seconds": round(secs, 1), "ok": v.get("status") != "compile_error", "scheme": "hipcc 7 (PCH/split)",
            "status": v.get("status"), "reason": v.get("reason"), "timings": v.get("timings"),
            "error": _first_error_line(str(v.get("diagnostics") or v.get("message") or ""))}


def main() -> int:
    from amdkv.tasks.builtin import BUILTIN_ROOT
    from amdkv.verify.backends import hip_pch, hip_toolchain
    from amdkv.verify.backends.hip import capture_hip_sources

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidate", action="append", default=[], help="broken candidates (default: compile_*.py)")
    ap.add_argument("--task", default=str(BUILTIN_ROOT / "general" / "l1_relu.py"), help="their task file")
    ap.add_argument("--repeat", type=int, default=1, help="cold builds per candidate and setting")
    ap.add_argument("--settings", default="cuda,cuda_lean,cuda_spec,gfx942",
                    help="cuda (split, full), cuda_lean (lean first), cuda_spec (hip_speculative_full), gfx942")
    ap.add_argument("--label", default="", help="a name for this run in the table (e.g. before/after)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = args.settings.split(",")
    cands = [Path(c) for c in args.candidate] or sorted(BROKEN.glob("compile_*.py"))
    os.environ.setdefault("CPATH", str(CI_INCLUDE))
    cache = out / "build-cache"
    cache.mkdir(exist_ok=True)
    if any(s.startswith("cuda") for s in settings):
        t0 = time.monotonic()
        hip_pch.host_pch(hip_toolchain.nvcc_toolchain("sm_90"), [], cache_dir=cache)
        print(f"host precompiled header ready in {time.monotonic() - t0:.1f} s", flush=True)
    rows = []
    for cand in cands:
        cap = capture_hip_sources(cand)
        caps = cap.report.captures if cap.report else []
        if not caps:
            rows.append({"candidate": cand.name, "error": cap.worker_error or "no capture"})
            continue
        if "gfx942" in settings:  # the first call builds hipcc's torch PCH: not what a candidate pays
            _time_gfx942(cand, Path(args.task))  # (kept in the chroot, not in the result cache)
        for setting in settings:
            for rep in range(args.repeat):
                if setting == "gfx942":
                    r = _time_gfx942(cand, Path(args.task))
                else:
                    r = _time_cuda(caps[0], setting, cache)
                r.update(candidate=cand.name, setting=setting, repeat=rep)
                rows.append(r)
                print(f"{cand.name:<26} {setting:<10} {r['seconds']:6.1f} s  ok={r['ok']}  {r['scheme']:<8} "
                      f"{r.get('per_scheme_s', '')} {r['error'][:80]}", flush=True)
    summary = {}
    for setting in settings:
        secs = [r["seconds"] for r in rows if r.get("setting") == setting]
        if secs:
            summary[setting] = {"runs": len(secs), "median_s": statistics.median(secs), "max_s": max(secs)}
    result = {"label": args.label, "machine": f"{platform.node()} ({os.cpu_count()} cores)",
              "platform": "compile only on the host: cuda = nvcc sm_90, gfx942 = hipcc 7; no GPU run",
              "rows": rows, "summary": summary}
    (out / "compile_error.json").write_text(json.dumps(result, indent=1))
    lines = ["| candidate | setting | seconds | seconds per scheme | answered by | first error line |",
             "|---|---|---:|---|---|---|"]
    lines += [f"| {r['candidate']} | {r.get('setting')} | {r.get('seconds')} | {r.get('per_scheme_s', '')} | {r.get('scheme')} | "
              f"{r.get('error', '').replace('|', '/')[:100]} |" for r in rows]
    lines += ["", "| setting | runs | median s | max s |", "|---|---:|---:|---:|"]
    lines += [f"| {s} | {v['runs']} | {v['median_s']} | {v['max_s']} |" for s, v in summary.items()]
    (out / "compile_error.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
