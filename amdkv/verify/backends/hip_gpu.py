"""HIP candidates on a GPU platform (cuda through the compatibility layer, rocm natively).

Called by `Verifier._verify_hip` on GPU platforms; uses the verifier only through its public
`backend_api.RunAndJudge` surface (the same static gate and run-and-judge path as Triton). Steps:
 1. static AST checks of the Python file (as for Triton; HIP may import torch.utils.cpp_extension);
 2. capture the `load_inline`/`load` calls in a sandboxed process (backends/hip.py);
 3. on `cuda`: the semantics guard (backends/hip_semantics.py) -> `unverifiable` for wave64-dependent,
    AMD-only or FNUZ-fp8 code, before anything is built;
 4. build every captured call with nvcc + compat headers (cuda) or hipcc (rocm), cached by content;
 5. run the candidate in a fresh spare worker that receives the prebuilt modules (backends/hip_run.py),
    with every runtime guard of the Triton path; judge and time exactly as for Triton.
Verdicts carry `platform` = the verifier's platform (`cuda` is never reported as an AMD number).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from amdkv.errors import InfrastructureError
from amdkv.verify.backend_api import RunAndJudge
from amdkv.verify.verdict import COMPILE_ERROR, TIMEOUT, UNVERIFIABLE, ArchResources
from amdkv.verify.worker_protocol import BackendJobPart, HipPrebuilt

_TOOLCHAINS: dict[str, Any] = {}


def _toolchain(platform: str) -> Any:
    from amdkv.verify.backends.hip_toolchain import toolchain_for_platform

    if platform not in _TOOLCHAINS:
        _TOOLCHAINS[platform] = toolchain_for_platform(platform)
    return _TOOLCHAINS[platform]


def verify_hip_on_gpu(verifier: RunAndJudge, v: Any, task: Any, cand_path: Path, source: str) -> None:
    """Fill verdict `v` for HIP candidate `cand_path` (text `source`) on the verifier's GPU platform."""
    from amdkv.verify.backends import hip as hip_backend
    from amdkv.verify.backends import hip_semantics
    from amdkv.verify.backends.hip_build import build_captures
    from amdkv.verify.backends.hip_toolchain import compat_headers_hash

    platform = verifier.platform.name
    if verifier.static_gate(v, task, source, "hip", str(cand_path)):
        return
    t0 = time.monotonic()
    capture = hip_backend.capture_hip_sources(cand_path, task.path, timeout=min(verifier.timeout, 180.0),
                                              start=verifier.config.spare_start, sandbox=verifier.config.sandbox,
                                              gpu=True)
    v.timings["hip_capture_s"] = round(time.monotonic() - t0, 3)
    if capture.worker_error:
        timed_out = "timed out" in capture.worker_error
        return verifier.finish(v, TIMEOUT if timed_out else COMPILE_ERROR,
                               "wall_timeout" if timed_out else "candidate_import_error",
                               compiled=False, diag=capture.worker_error)
    captures = capture.report.captures
    if not captures:
        if capture.report.import_error:
            return verifier.finish(v, COMPILE_ERROR, "candidate_import_error", compiled=False,
                                   diag="importing the candidate failed:\n" + capture.report.import_error)
        return verifier.finish(v, COMPILE_ERROR, "no_hip_sources", compiled=False,
                               diag="no load_inline/load call was captured: HIP candidates build their kernels "
                                    "with torch.utils.cpp_extension.load_inline at import or in __init__")
    if platform == "cuda":
        sem = hip_semantics.analyse_captures(captures)
        if sem:
            v.diagnostics += "\n" + hip_semantics.explain(sem)
            v.hack_findings = []
            return verifier.finish(v, UNVERIFIABLE, hip_semantics.verdict_reason(sem))
    try:
        tc = _toolchain(platform)
    except InfrastructureError:
        raise
    t0 = time.monotonic()
    builds = build_captures(captures, tc, timeout=max(verifier.timeout, 300.0), lean=verifier.config.hip_lean_build,
                            speculative=verifier.config.hip_speculative_full)
    v.timings["hip_build_s"] = round(time.monotonic() - t0, 3)
    v.env["hip_build"] = {"platform": platform, "compiler": tc.version, "arch": tc.arch,
                          "compat_headers": compat_headers_hash() if platform == "cuda" else None,
                          "cached": [b.cached for b in builds],
                          "scheme": [getattr(b, "scheme", None) for b in builds],
                          "fallback_reason": [getattr(b, "fallback_reason", None) for b in builds]}
    failed = [b for b in builds if not b.ok]
    if failed:
        if any(b.timed_out for b in failed):
            raise InfrastructureError(f"building HIP extension {failed[0].name!r} timed out",
                                      hint="the machine is overloaded; retry with fewer jobs")
        reason = "nvcc_error" if platform == "cuda" else "hipcc_error"
        return verifier.finish(v, COMPILE_ERROR, reason, compiled=False,
                               diag="\n\n".join(f"[{b.name}] {b.error}" for b in failed))
    _run_and_judge(verifier, v, task, cand_path, builds)
    if v.reason == "no_kernel_launch":
        v.diagnostics += "\n(HIP: forward never called a function of the candidate's extension)"
    if verifier.archs and captures:
        _amd_resources(verifier, v, captures)


def _run_and_judge(verifier: RunAndJudge, v: Any, task: Any, cand_path: Path, builds: list[Any]) -> None:
    extra = BackendJobPart(hip_prebuilt=[HipPrebuilt(name=b.name, so_path=b.so_path, module_name=b.module_name)
                                         for b in builds])
    verifier.run_and_judge(v, task, cand_path, extra)


def _amd_resources(verifier: RunAndJudge, v: Any, captures: list[dict[str, Any]]) -> None:
    """With `--arch`, also compile the sources for the AMD targets (resources only)."""
    try:
        from amdkv.verify.backends.hip import compile_units
        from amdkv.verify.backends.hip_sources import translation_units

        units = [u for c in captures for u in translation_units(c)]
        t0 = time.monotonic()
        results = compile_units(units, verifier.archs)
        v.timings["amd_compile_s"] = round(time.monotonic() - t0, 3)
        v.resources = [r if isinstance(r, ArchResources) else ArchResources(**r)
                       for res in results for r in res.resources]
        bad = [f"[{r.unit} {r.arch}] {r.error}" for r in results if not r.ok]
        if bad:
            v.diagnostics += "\n[amd] " + "\n".join(bad)
    except Exception as exc:  # noqa: BLE001 - resources are extra information, never the verdict
        v.diagnostics += f"\n[amd] AMD compile unavailable: {type(exc).__name__}: {exc}"
