"""Recompile a captured Triton launch for an AMD arch and read its resources (no GPU needed).

`triton.compile(ASTSource(...), target=GPUTarget("hip", arch, 64))` runs Triton's own AMD
pipeline with the wheel's bundled LLVM (TOOLCHAINS.md). Registers, spills, scratch and register
occupancy come from the `.amdgpu_metadata` block and `; Occupancy:` comment of the amdgcn asm.
LDS is allocated at launch, so it is read from `metadata.shared` and checked against the arch's
limit here; occupancy is clamped by what LDS allows.

Interpreter note (measured, see docs/amd_compile.md): under `TRITON_INTERPRET=1` the decorated
object is an `InterpretedFunction`; `jit_function_for` builds a fresh `JITFunction` from the plain
Python function in the same process and `triton.compile` works there too, so no second process is
needed just for that. The verifier still compiles in a separate worker because candidate code
(imported to get the function) is untrusted.
"""

from __future__ import annotations

import re
import time
from typing import Any

from amdkv.archs import get_arch, lds_occupancy_cap
from amdkv.verify.amd.triton_capture import OPTION_KEYS, decode_value, jit_function_for
from amdkv.verify.verdict import ArchResources

MAX_ERROR_CHARS = 4000
_META_FIELDS = {
    "vgpr": r"\.vgpr_count:\s*(\d+)",
    "agpr": r"\.agpr_count:\s*(\d+)",
    "sgpr": r"\.sgpr_count:\s*(\d+)",
    "vgpr_spill": r"\.vgpr_spill_count:\s*(\d+)",
    "sgpr_spill": r"\.sgpr_spill_count:\s*(\d+)",
    "scratch_bytes": r"\.private_segment_fixed_size:\s*(\d+)",
}


def parse_amdgcn(asm: str) -> dict[str, int | None]:
    """Resource fields from amdgcn asm text (first kernel's `.amdgpu_metadata`)."""
    meta = asm
    m = re.search(r"\.amdgpu_metadata(.*?)\.end_amdgpu_metadata", asm, re.S)
    if m:
        meta = m.group(1)
    out: dict[str, int | None] = {}
    for key, pat in _META_FIELDS.items():
        f = re.search(pat, meta)
        out[key] = int(f.group(1)) if f else None
    occ = re.search(r";\s*Occupancy:\s*(\d+)", asm)
    out["occupancy"] = int(occ.group(1)) if occ else None
    return out


def exceeds_lds(res: ArchResources) -> bool:
    """True when the kernel needs more LDS per workgroup than the arch has (it would fail at launch)."""
    return res.lds_bytes is not None and res.lds_limit is not None and res.lds_bytes > res.lds_limit


def _resolver(modules: dict[str, Any] | None):
    """Resolve `module:qualname` constexpr functions (e.g. an activation passed as constexpr).

    `modules` maps module names recorded at capture time to modules loaded here (the worker
    loads the candidate file under its own name).
    """
    import importlib
    import sys

    def resolve(name: str):
        mod_name, _, qual = name.partition(":")
        obj = (modules or {}).get(mod_name) or sys.modules.get(mod_name) or importlib.import_module(mod_name)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj

    return resolve


def build_source(jit_fn, capture: dict, modules: dict[str, Any] | None = None):
    """`ASTSource` for the captured launch (fresh `JITFunction` if `jit_fn` is interpreted)."""
    from triton.backends.amd.compiler import HIPBackend
    from triton.compiler import ASTSource

    jf = jit_function_for(jit_fn)
    names = list(jf.arg_names)
    resolve = _resolver(modules)
    signature = {n: capture["signature"][n] for n in names}
    constexprs = {(names.index(n),): decode_value(v, resolve) for n, v in capture.get("constexprs", {}).items()}
    attrs = {(names.index(n),): HIPBackend.parse_attr(s) for n, s in capture.get("attrs", {}).items()}
    return jf, ASTSource(jf, signature, constexprs=constexprs, attrs=attrs)


def compile_options(capture: dict) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for key in ("num_warps", "num_stages"):
        if capture.get(key) is not None:
            opts[key] = capture[key]
    for key, v in (capture.get("options") or {}).items():
        if key in OPTION_KEYS and key != "arch":
            opts[key] = decode_value(v)
    return opts


def compile_capture_for_arch(jit_fn, capture: dict, arch: str,
                             modules: dict[str, Any] | None = None) -> ArchResources:
    """Compile one captured launch for `arch`; compile failures become `compiled=False` + `error`.

    `jit_fn` is the kernel object (JITFunction, InterpretedFunction, Autotuner/Heuristics wrapper)
    or its plain Python function; `capture` comes from `triton_capture.capture_launch`.
    """
    import triton
    from triton.backends.compiler import GPUTarget

    info = get_arch(arch)
    kernel = capture.get("kernel") or getattr(jit_fn, "__name__", "?")
    opts = compile_options(capture)
    config = {"constexprs": capture.get("constexprs", {}), "num_warps": capture.get("num_warps"),
              "num_stages": capture.get("num_stages"), "options": capture.get("options") or {},
              "autotune": capture.get("autotune_config")}
    res = ArchResources(arch=arch, kernel=kernel, compiled=False, lds_limit=info.lds_bytes if info else None,
                        config=config)
    if info is None:
        res.error = f"unknown AMD arch {arch!r}; known: gfx90a, gfx942, gfx950"
        return res
    t0 = time.monotonic()
    try:
        _, src = build_source(jit_fn, capture, modules)
        ck = triton.compile(src, target=GPUTarget("hip", arch, info.wave_size), options=opts)
    except Exception as e:  # noqa: BLE001 - any compiler failure is the candidate's compile error
        msg = f"{type(e).__name__}: {e}"
        res.error = msg if len(msg) <= MAX_ERROR_CHARS else msg[:MAX_ERROR_CHARS] + "\n... (truncated)"
        config["compile_seconds"] = round(time.monotonic() - t0, 3)
        return res
    config["compile_seconds"] = round(time.monotonic() - t0, 3)
    asm = ck.asm.get("amdgcn", "")
    if isinstance(asm, bytes):
        asm = asm.decode(errors="replace")
    fields = parse_amdgcn(asm)
    res.compiled = True
    for key, value in fields.items():
        setattr(res, key, value)
    shared = int(getattr(ck.metadata, "shared", 0) or 0)
    res.lds_bytes = shared
    num_warps = int(getattr(ck.metadata, "num_warps", opts.get("num_warps", 4)) or 4)
    config["num_warps_compiled"] = num_warps
    config["num_stages_compiled"] = getattr(ck.metadata, "num_stages", None)
    config["mfma_instructions"] = len(re.findall(r"\bv_mfma_", asm))
    cap = lds_occupancy_cap(arch, shared, num_warps)
    if cap is not None and res.occupancy is not None:
        res.occupancy = min(res.occupancy, cap)
    if exceeds_lds(res):
        res.error = f"LDS {shared} B exceeds {arch} limit {res.lds_limit} B"
    return res
