"""Which part of the OS sandbox stops a GPU runtime from starting? (diagnostic for a GPU machine)

Each variant runs in a fresh Python process that enters the worker's sandbox plan with parts changed,
imports torch, then starts CUDA/HIP (`torch.empty(1, device="cuda")`). Found
necessary on the H200 (session 7): every sandboxed GPU worker failed with
"cudaGetDeviceCount() ... Error 304: OS call failed", and the sandbox's parts are separate
mechanisms (namespaces, Landlock, seccomp, limits), so the fix depends on which one.

Usage: python benchmarks/sandbox_gpu_probe.py --out DIR [--variants V,V] [--deep] [--strace]
Writes DIR/probe.json and prints one line per variant.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import functools, json, os, sys
from amdkv.verify import os_sandbox as S
# VARIANT[|MODIFIER...]: off | full | only:PART+PART (ns, nnp, landlock, seccomp, limits); modifiers
# noscope, noscope_unix, nodata (no RLIMIT_DATA), wtmp, rall, wall, dall, ioctl_all, allow=NAME+NAME
variant, *mods = sys.argv[1].split("|")
from amdkv.process import cap_host_memory
host_memory = 32 << 30  # a GPU worker's RLIMIT_DATA (AMDKV_GPU_HOST_MEM_GIB), applied at its start, not by the sandbox
from amdkv.verify.pool import make_worker_dirs
_root, scratch, _in = make_worker_dirs()  # a worker's own folders (group rights as root)
os.environ["TMPDIR"] = os.environ["TMP"] = os.environ["TEMP"] = scratch  # as pool.worker_env gives them
plan = S.plan("auto", writable=[scratch], gpu=True, nproc=S.default_nproc(), file_size_bytes=1 << 32,
              cpu_seconds=120)
for mod in mods:
    if mod == "noscope":
        S._LL_SCOPE_ABSTRACT_UNIX = S._LL_SCOPE_SIGNAL = 0
    elif mod == "noscope_unix":
        S._LL_SCOPE_ABSTRACT_UNIX = 0
    elif mod == "nodata":
        host_memory = None
    elif mod == "wtmp":
        plan = S.SandboxPlan(**{**plan.__dict__, "writable": plan.writable + tuple(S._existing(["/tmp", "/dev/shm", "/run"]))})
    elif mod in ("rall", "wall", "dall", "ioctl_all"):  # widen one kind of Landlock rule to bisect
        field, extra = {"rall": ("readable", "/"), "wall": ("writable", "/"), "dall": ("devices", "/dev"),
                        "ioctl_all": ("devices", "/")}[mod]
        plan = S.SandboxPlan(**{**plan.__dict__, field: getattr(plan, field) + (extra,)})
    elif mod.startswith("allow="):
        S.apply_seccomp = functools.partial(S.apply_seccomp, refused=tuple(x for x in S._REFUSED if x not in mod[6:].split("+")))
if variant.startswith("only:"):  # apply only these parts: ns, nnp, landlock, seccomp, limits
    parts = set(variant[5:].split("+"))
    if "ns" not in parts:
        S._enter_namespaces = lambda applied, missing: None
    if "landlock" not in parts:
        S._apply_landlock = lambda p, abi, applied: None
    if "seccomp" not in parts:
        S.apply_seccomp = lambda *a, **k: None
    if "nnp" not in parts:
        S._LIBC.prctl = lambda *a: 0
    if "limits" not in parts:
        plan = S.SandboxPlan(**{**plan.__dict__, "nproc": None, "cpu_seconds": None, "file_size_bytes": None})
        host_memory = None
# entered single-threaded, before torch, as a forked worker does (a threaded process cannot enter a
# user namespace). `applied` is enter()'s own list: a part patched out above may still be named.
if variant != "off":
    cap_host_memory(host_memory)
applied = {} if variant == "off" else S.enter(plan)
import torch
out = {"variant": sys.argv[1], "applied": applied.get("applied"), "missing": applied.get("missing")}
step = "cuda init"
try:
    n = torch.cuda.device_count()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    if "--deep" in sys.argv:  # what a worker does next: a Triton JIT compile + launch, a profiler session
        os.environ["TRITON_CACHE_DIR"] = scratch
        import importlib.util
        kernel_file = os.path.join(scratch, "probe_kernel.py")  # @triton.jit needs a source file
        with open(kernel_file, "w") as fh:
            fh.write("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                     "def _add_one(x_ptr, n, BLOCK: tl.constexpr):\n"
                     "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                     "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)\n")
        spec = importlib.util.spec_from_file_location("probe_kernel", kernel_file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _add_one = mod._add_one

        step = "triton"
        x = torch.zeros(1000, device="cuda")
        _add_one[(4,)](x, 1000, BLOCK=256)
        assert float(x.sum()) == 1000.0
        step = "profiler"
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            _add_one[(4,)](x, 1000, BLOCK=256)
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if "add_one" in e.name]
        assert kernels, "the profiler saw no kernel"
    out.update(ok=True, devices=n)
except Exception as exc:
    out.update(ok=False, error=f"{step}: {type(exc).__name__}: {str(exc)[:300]}")
print("PROBE " + json.dumps(out))
"""

# each part removed, each part alone, and the allowances and Landlock widenings that located the
# H200's failures (docs/sandbox.md)
VARIANTS = ("off", "full", "only:ns+nnp+landlock+limits", "only:ns+nnp+seccomp+limits",
            "only:nnp+landlock+seccomp+limits", "only:ns+nnp+landlock+seccomp", "full|nodata", "full|noscope",
            "full|allow=socket", "full|wtmp", "only:", "only:limits", "only:nnp", "only:ns", "only:nnp+landlock",
            "only:nnp+seccomp", "only:nnp+seccomp|allow=socket", "only:nnp+landlock|rall",
            "only:nnp+landlock|wall", "only:nnp+landlock|dall", "only:nnp+landlock|ioctl_all")


def run_variant(variant: str, strace_dir: Path | None, deep: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    argv = [sys.executable, "-c", CHILD, variant] + (["--deep"] if deep else [])
    if strace_dir is not None:
        argv = ["strace", "-f", "-o", str(strace_dir / f"{variant}.strace"), *argv]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("PROBE ")), None)
    res = json.loads(line[6:]) if line else {"variant": variant, "ok": False, "error": f"rc {r.returncode}"}
    res["stderr_tail"] = r.stderr[-800:]
    return res


def failed_calls(trace: Path, limit: int = 80) -> list[str]:
    """System calls that returned an error in a trace (EPERM/EACCES first: what a sandbox refuses)."""
    if not trace.is_file():
        return []
    lines = [ln.strip() for ln in trace.read_text(errors="replace").splitlines() if "= -1 E" in ln]
    refused = [ln for ln in lines if "EPERM" in ln or "EACCES" in ln]
    return (refused + [ln for ln in lines if ln not in refused])[:limit]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--strace", action="store_true", help="also trace the `full` variant (needs strace)")
    ap.add_argument("--deep", action="store_true", help="after CUDA starts: a Triton kernel and a profiler session")
    ap.add_argument("--variants", default=None, help="comma-separated subset of: " + ", ".join(VARIANTS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for v in (args.variants.split(",") if args.variants else VARIANTS):
        res = run_variant(v, None, args.deep)
        results.append(res)
        print(f"{v:24s} {'OK' if res.get('ok') else 'FAIL'}  {res.get('error', '')}", flush=True)
    if args.strace and shutil.which("strace"):
        tdir = Path(tempfile.mkdtemp(prefix="amdkv-strace-"))
        run_variant("full", tdir)
        calls = failed_calls(tdir / "full.strace")
        (out / "full_failed_calls.txt").write_text("\n".join(calls) + "\n")
        print("\n".join(calls[:30]))
    (out / "probe.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
