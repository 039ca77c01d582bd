"""HIP candidates, compile-only: capture their sources, compile them for AMD archs with a real hipcc.

Nothing can run HIP on the machines this targets (no AMD GPU), so the best verdict is
`unverifiable` (reason `no_hip_runtime`) with `compiled=True` and per-kernel resources; a source
that hipcc rejects for the first arch is a `compile_error` (reason `hipcc_error`).

Public: `capture_hip_sources(candidate, task=None)`, `compile_units(units, archs)`,
`verify_hip_compile_only(task_path, candidate_path, archs)`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from pathlib import Path
from typing import Sequence

from amdkv.verify.backends.hip_sources import (TranslationUnit, device_only_source, global_kernel_names,
                                                translation_units)
from amdkv.verify import os_sandbox
from amdkv.verify.sandbox import run_python_module, with_package_on_path
from amdkv.verify.verdict import ArchResources
from amdkv.verify.worker_protocol import HipCaptureReport

CAPTURE_WORKER = "amdkv.verify.backends.hip_capture_worker"
CAPTURE_MEMORY_BYTES = 16 << 30  # a capture imports and constructs the candidate: no outputs, no inputs


@dataclasses.dataclass(frozen=True)
class HipCapture:
    """What `capture_hip_sources` found: the capture worker's report, or why there is none."""

    report: HipCaptureReport  # the captured calls, import_error, init_error (empty with worker_error)
    worker_error: str | None  # the capture process itself died or timed out (it left no report)


def capture_hip_sources(candidate_path: str | os.PathLike, task_path: str | os.PathLike | None = None,
                        timeout: float = 120, start: str = "auto", sandbox: str = "auto", gpu: bool = False) -> HipCapture:
    """Run the candidate in a sandboxed process with `load_inline`/`load` patched; return its captures.
    `sandbox`: the OS sandbox mode (config.sandbox); `gpu`: let it open GPU device files (a candidate's
    `__init__` may put tensors on the GPU). A report with a field missing or unknown, or cut short,
    raises (ProtocolError, JSONDecodeError): a harness failure, as for a worker's report.
    """
    with tempfile.TemporaryDirectory(prefix="amdkv-hipcap-") as tmp:
        out = Path(tmp) / "out.json"
        args = [str(Path(candidate_path).resolve()), str(out)]
        if task_path:
            args.append(str(Path(task_path).resolve()))
        env = with_package_on_path(os.environ)
        env["TORCH_EXTENSIONS_DIR"] = str(Path(tmp) / "torch_ext")
        # The memory cap: the data segment (process.cap_host_memory), with or without `gpu` and whatever the
        # sandbox mode. Before session 28 a CPU-only capture capped the address space instead, which CUDA
        # torch's libraries alone take gigabytes of, and GPU runtimes reserve huge ranges of.
        plan = os_sandbox.plan(sandbox, writable=[tmp], readable=args[:1] + args[2:], gpu=gpu)
        res = run_python_module(CAPTURE_WORKER, args, timeout=timeout, env=env, cwd=tmp,
                                host_memory_bytes=CAPTURE_MEMORY_BYTES, start=start, sandbox=plan)
        if res.returncode == 0 and out.is_file():
            return HipCapture(HipCaptureReport.from_json(out.read_text()), worker_error=None)
        why = (f"capture timed out after {timeout:.0f} s" if res.timed_out else
               f"capture process died ({res.signal_name or f'rc {res.returncode}'}): {res.stderr.strip()[-2000:]}")
        return HipCapture(HipCaptureReport(captures=[], import_error=None, init_error=None), worker_error=why)


@dataclasses.dataclass
class UnitResult:
    unit: str
    arch: str
    ok: bool
    resources: list[ArchResources]
    error: str | None
    seconds: float
    path: str          # "device-split" | "full" | "cached" (how the result was obtained)


def _compile_unit(compiler, unit: TranslationUnit, arch: str) -> UnitResult:
    """Fast device-split compile, falling back to the full (precompiled torch headers) compile."""
    t0 = time.monotonic()
    expected = global_kernel_names(unit.source)
    if unit.torch_headers:
        split, _ = device_only_source(unit.source)
        fast = compiler.compile(split, arch, unit.flags)
        names = {r.kernel.split("<")[0].split("::")[-1] for r in fast.resources}
        if fast.ok and expected <= names:
            return UnitResult(unit.name, arch, True, fast.resources, None, time.monotonic() - t0,
                              "cached" if fast.cached else "device-split")
    full = compiler.compile(unit.source, arch, unit.flags, torch_headers=unit.torch_headers)
    return UnitResult(unit.name, arch, full.ok, full.resources, full.error, time.monotonic() - t0,
                      "cached" if full.cached else "full")


def compile_units(units: list[TranslationUnit], archs: Sequence[str], compiler=None,
                  max_workers: int | None = None) -> list[UnitResult]:
    """Compile every unit with device code for every arch, in parallel; results in (unit, arch) order."""
    import concurrent.futures

    from amdkv.toolchain.hipcc import HipCompiler

    compiler = compiler or HipCompiler(arch_hint=archs[0])
    jobs = [(u, a) for u in units if u.has_device_code for a in archs]
    workers = max_workers or max(1, min(len(jobs), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda job: _compile_unit(compiler, *job), jobs))


def _verdict(status: str, reason: str | None, archs: Sequence[str], **kw) -> dict:
    d = {"status": status, "reason": reason, "language": "hip", "platform": "static:" + ",".join(archs),
         "compiled": None, "correct": None, "resources": [], "diagnostics": "", "env": {}, "timings": {}}
    d.update(kw)
    return d


def verify_hip_compile_only(task_path: str | os.PathLike | None, candidate_path: str | os.PathLike,
                            archs: Sequence[str] = ("gfx942",), *, capture_timeout: float = 120,
                            compiler=None, start: str = "auto", sandbox: str = "auto") -> dict:
    """Verdict fields for a HIP candidate judged by compiling it for `archs` (first arch decides)."""
    from amdkv.toolchain.errors import ToolchainError

    archs = list(archs)
    t0 = time.monotonic()
    capture = capture_hip_sources(candidate_path, task_path, timeout=capture_timeout, start=start, sandbox=sandbox)
    timings = {"capture_s": round(time.monotonic() - t0, 3)}
    notes = []
    if capture.worker_error:
        return _verdict("compile_error" if "timed out" not in capture.worker_error else "timeout",
                        "candidate_import_error", archs, compiled=False, diagnostics=capture.worker_error,
                        timings=timings)
    cap = capture.report
    if cap.init_error:
        notes.append("ModelNew construction (with the extension stubbed) raised:\n" + cap.init_error)
    units = [u for c in cap.captures for u in translation_units(c)]
    if not any(u.has_device_code for u in units):
        if cap.import_error:
            return _verdict("compile_error", "candidate_import_error", archs, compiled=False,
                            diagnostics="importing the candidate failed:\n" + cap.import_error, timings=timings)
        why = ("no load_inline/load call was captured" if not cap.captures else
               "the captured sources contain no GPU code (__global__/__device__)")
        return _verdict("compile_error", "no_hip_sources", archs, compiled=False, diagnostics=why, timings=timings)
    if cap.import_error:
        notes.append("importing the candidate raised after its sources were captured:\n" + cap.import_error)
    host_only = [u.name for u in units if not u.has_device_code]
    if host_only:
        notes.append(f"host-only binding units not compiled (no GPU code): {', '.join(host_only)}")
    try:
        from amdkv.toolchain.hipcc import HipCompiler

        compiler = compiler or HipCompiler(arch_hint=archs[0])
    except ToolchainError as e:
        return _verdict("infra_error", "no_hipcc", archs, diagnostics=str(e), timings=timings)
    t1 = time.monotonic()
    results = compile_units(units, archs, compiler)
    timings["compile_s"] = round(time.monotonic() - t1, 3)
    resources = [dataclasses.asdict(r) for res in results for r in res.resources]
    first = [r for r in results if r.arch == archs[0]]
    failed = [r for r in first if not r.ok]
    diag = [f"[{r.unit} {r.arch}] {r.error}" for r in results if not r.ok] + notes
    env = {"hipcc": compiler.toolchain.version, "toolchain": compiler.toolchain.kind,
           "compile_paths": sorted({f"{r.unit}:{r.arch}:{r.path}" for r in results})}
    if failed:
        return _verdict("compile_error", "hipcc_error", archs, compiled=False, resources=resources,
                        diagnostics="\n\n".join(diag), env=env, timings=timings)
    return _verdict("unverifiable", "no_hip_runtime", archs, compiled=True, resources=resources,
                    diagnostics="\n\n".join(diag), env=env, timings=timings)
