"""Compile-time benchmark for the AMD static targets (Triton AOT and hipcc 7 in the sid chroot).

    .venv/bin/python benchmarks/bench_amd_compile.py [--json]

Measures: Triton AOT per arch (vector add, fp16 matmul), hipcc cold compile of a plain kernel,
warm cache hit, and a torch-extension unit three ways: full torch headers without PCH, with the
precompiled header (PCH build time reported separately), and the device-split fast path.
Numbers depend on machine load: run it on an idle machine.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="amdkv-bench-triton-")  # cold Triton compiles


def timed(fn):
    t = time.monotonic()
    out = fn()
    return out, round(time.monotonic() - t, 2)


def bench_triton() -> dict:
    import test_amd_triton as k
    from amdkv.verify.amd.triton_aot import compile_capture_for_arch

    out = {}
    for arch in ("gfx90a", "gfx942", "gfx950"):
        r = compile_capture_for_arch(k.add_kernel, k._add_capture(), arch)
        out[f"triton_vector_add_{arch}_s"] = r.config["compile_seconds"]
        r = compile_capture_for_arch(k.matmul_kernel, k._matmul_capture(128, 128, 64, 8, 2), arch)
        out[f"triton_matmul_{arch}_s"] = r.config["compile_seconds"]
    return out


def bench_hip() -> dict:
    from amdkv.toolchain.hipcc import HipCompiler
    from amdkv.verify.backends.hip_sources import device_only_source, translation_units

    out = {}
    with tempfile.TemporaryDirectory() as cache:
        comp = HipCompiler(cache_dir=Path(cache))
        src = "#include <hip/hip_runtime.h>\n__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }\n"
        _, out["hip_plain_cold_s"] = timed(lambda: comp.compile(src, "gfx942"))
        _, out["hip_plain_cache_hit_s"] = timed(lambda: comp.compile(src, "gfx942"))
        text = (ROOT / "tests/data/hip_candidates/ok_relu_kb.py").read_text().split('r"""')[1].split('"""')[0]
        unit = translation_units({"api": "load_inline", "name": "e", "cpp_sources": [text]})[0]
        nopch = HipCompiler(cache_dir=False, use_pch=False)
        _, out["hip_torch_ext_full_no_pch_s"] = timed(lambda: nopch.compile(unit.source, "gfx942", torch_headers=True))
        pch = HipCompiler(cache_dir=False)
        _, out["hip_torch_pch_build_or_reuse_s"] = timed(lambda: pch.ensure_pch("gfx942"))
        _, out["hip_torch_ext_full_with_pch_s"] = timed(lambda: pch.compile(unit.source, "gfx942", torch_headers=True))
        split, _ = device_only_source(unit.source)
        _, out["hip_torch_ext_device_split_s"] = timed(lambda: pch.compile(split, "gfx942"))
    return out


if __name__ == "__main__":
    res = {**bench_triton(), **bench_hip()}
    if "--json" in sys.argv:
        print(json.dumps(res, indent=1))
    else:
        for key, v in res.items():
            print(f"{key:40s} {v}")
