"""Which worker setting makes TritonBench-G reference workers die with SIGSEGV on the H200?

On 2026-12-02 (sessions 11 and 12) 100-137 of 184 TritonBench-G reference workers died with rc -11:
forked workers while importing amdkv's own task loader ("Garbage-collecting" at the top of the
stack), exec'd sandboxed ones inside Triton's `_init_handles`. The disk was 23 % full, so not a full
disk. Seeding Triton's driver helper was the setting that mattered (it is off by default since).
This runs the same reference evaluation (external_gpu.amdkv_phase) once per setting, each in
a fresh process with one environment variable changed and the same time budget, and counts the
crashed attempts and where they died, so the cause is narrowed by experiment, not by guessing.

    python benchmarks/crash_probe.py --out OUT --geak-eval .ext/GEAK-eval --tritonbench .ext/TritonBench
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

# Session 12 measured these with stub seeding on by default (it is off since): default 8 crashed
# workers of 17, exec 4/14, sandbox_off 8/17, no_profiler_prewarm 8/17, no_blocking_sync 8/17, and
# 0/24 with seeding off (docs/gpu.md, Known gaps). `stub_seed` is the setting to re-test.
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "stub_seed": {"AMDKV_SEED_TRITON_STUBS": "1"},
    "exec": {"AMDKV_SPARE_START": "exec"},
    "sandbox_off": {"AMDKV_SANDBOX": "off"},
    "no_profiler_prewarm": {"AMDKV_PREWARM_PROFILER": "0"},
    "no_blocking_sync": {"AMDKV_BLOCKING_SYNC": "0"},
    "all_off": {"AMDKV_SPARE_START": "exec", "AMDKV_SANDBOX": "off", "AMDKV_PREWARM_PROFILER": "0",
                "AMDKV_BLOCKING_SYNC": "0"},
    "one_job": {},
}
VARIANT_JOBS = {"one_job": 1}  # no concurrency: the same settings, one reference worker at a time


def crash_counts(stderr: str) -> dict[str, int]:
    """Attempt labels and the place each crashed attempt died, from the eval's stderr."""
    counts: dict[str, int] = {}
    for label in re.findall(r"attempt (\d) of \d \(([^)]*)\)", stderr):
        key = f"attempt {label[0]} ({label[1]})"
        counts[key] = counts.get(key, 0) + 1
    counts["died_garbage_collecting"] = stderr.count("  Garbage-collecting")
    counts["died_in_init_handles"] = len(re.findall(r"in _init_handles\n", stderr))
    counts["stacks_with_triton_launcher_loaded"] = len(re.findall(r"Extension modules:[^\n]*__triton_launcher", stderr))
    return counts


STUB_PROBE = """
import hashlib, json, os, sys
import triton
from triton.runtime.cache import get_cache_manager
triton.runtime.driver.active.get_current_device()  # Triton builds its own cuda_utils into TRITON_CACHE_DIR
found = [os.path.join(d, f) for d, _, fs in os.walk(os.environ["TRITON_CACHE_DIR"]) for f in fs if f.startswith("cuda_utils")]
print(json.dumps({p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in found}))
"""


def stub_comparison(work: Path) -> dict[str, object]:
    """The helper the parent seeds against the one Triton builds itself in a fresh process: same
    bytes? If not, which dynamic symbols or needed libraries differ (the crash's likeliest lead),
    and the compiler-related environment the parent built it in."""
    from amdkv.verify.triton_stubs import cuda_driver_stub

    stub = cuda_driver_stub(str(work / "stub-root"))
    env_keys = ("CC", "CFLAGS", "CPATH", "C_INCLUDE_PATH", "LIBRARY_PATH", "LD_LIBRARY_PATH", "TRITON_LIBCUDA_PATH")
    out: dict[str, object] = {"parent_env": {k: os.environ.get(k) for k in env_keys if os.environ.get(k)}}
    if stub is None:
        return {**out, "seeded": None, "note": "no stub can be built here (no libcuda)"}
    key, seeded = stub
    cache = work / "own-build-cache"
    env = {**os.environ, "TRITON_CACHE_DIR": str(cache)}
    proc = subprocess.run([sys.executable, "-c", STUB_PROBE], env=env, capture_output=True, text=True, timeout=300)
    own = json.loads((proc.stdout.strip().splitlines() or ["{}"])[-1]) if proc.returncode == 0 else {}
    seeded_sha = hashlib.sha256(Path(seeded).read_bytes()).hexdigest()
    out.update(seeded=seeded, seeded_sha256=seeded_sha, own_builds=own, same_bytes=seeded_sha in own.values(),
               own_build_error=proc.stderr[-1500:] if proc.returncode else None)
    for label, path in [("seeded", seeded), *(("own", p) for p in own)][:2]:
        for tool, flags in (("readelf", ["-d"]), ("nm", ["-D", "--defined-only"])):
            res = subprocess.run([tool, *flags, path], capture_output=True, text=True)
            out[f"{label}_{tool}"] = res.stdout[-3000:]
    return out


def one_variant(args: argparse.Namespace) -> int:
    """The child: one amdkv phase over TritonBench-G's references, summary JSON on stdout's last line."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from external_gpu import amdkv_phase

    spec = f"tritonbench-g:{args.geak_eval}?index={args.tritonbench}/data/TritonBench_G_v1.json"
    res = amdkv_phase(f"probe_{args.variant}", spec, Path(args.work), policy="strict", device="auto",
                      jobs=args.jobs, budget=args.budget, timeout=None)
    print(json.dumps({"verified": res["verified"], "seconds": res["seconds"], "status_counts": res["status_counts"]}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--geak-eval", required=True)
    ap.add_argument("--tritonbench", required=True)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--budget", type=float, default=32.0, help="seconds of verification per setting")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # the child's mode
    ap.add_argument("--work", default="/tmp/amdkv-crash-probe")
    args = ap.parse_args()
    if args.variant:
        return one_variant(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    Path(args.work).mkdir(parents=True, exist_ok=True)
    try:
        comparison = stub_comparison(Path(args.work))
    except Exception as exc:  # noqa: BLE001 - a lead, not the probe's point: record why it failed
        comparison = {"error": f"{type(exc).__name__}: {exc}"}
    (out / "stub_comparison.json").write_text(json.dumps(comparison, indent=1))
    print("seeded helper vs Triton's own build: same bytes =", comparison.get("same_bytes"), flush=True)
    rows = []
    for name in args.variants.split(","):
        env = {**os.environ, **VARIANTS[name]}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, __file__, "--variant", name, "--out", args.out, "--geak-eval", args.geak_eval,
                               "--tritonbench", args.tritonbench, "--jobs", str(VARIANT_JOBS.get(name, args.jobs)), "--budget", str(args.budget),
                               "--work", args.work], env=env, capture_output=True, text=True, timeout=args.budget + 120)
        (out / f"{name}.stderr.txt").write_text(proc.stderr[-400_000:])
        last = (proc.stdout.strip().splitlines() or ["{}"])[-1]
        try:
            summary = json.loads(last)
        except json.JSONDecodeError:
            summary = {"error": last[-300:]}
        rows.append({"variant": name, "env": VARIANTS[name], "rc": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
                     **summary, "crashes": crash_counts(proc.stderr)})
        print(json.dumps(rows[-1]), flush=True)
    (out / "crash_probe.json").write_text(json.dumps(rows, indent=1))
    print("\nvariant              verified  infra  crashed attempts (1st / 2nd / 3rd)  GC  init_handles  launcher-loaded")
    for r in rows:
        c, s = r["crashes"], r.get("status_counts") or {}
        att = [sum(v for k, v in c.items() if k.startswith(f"attempt {i}")) for i in (1, 2, 3)]
        print(f"{r['variant']:<20} {r.get('verified', '-'):>8} {s.get('infra_error', 0):>6}  {att[0]:>5} / {att[1]:>3} / {att[2]:>3}"
              f"{'':>18}{c['died_garbage_collecting']:>4}  {c['died_in_init_handles']:>12}  {c['stacks_with_triton_launcher_loaded']:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
