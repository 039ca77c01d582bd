"""Build captured HIP `load_inline`/`load` sources into a loadable torch extension (trusted side).

Compile the units (hip_units) with a toolchain (hip_toolchain), check the split scheme's bindings,
link, and cache the result by content: sources, flags, compiler identity, compatibility headers, torch
version, arch. The result is a plain `.so` the candidate's sandboxed worker loads (backends/hip_run.py).

Three build schemes (docs/hip.md, "Build speed"):
- `full` (rocm always; cuda fallback): every unit through nvcc/hipcc, the main unit with
  `<torch/extension.h>` and the generated `PYBIND11_MODULE` — what `load_inline` compiles;
- `split` (cuda first): units with device code through nvcc with the light `<torch/types.h>`, the
  binding and host-only units through the host C++ compiler with a precompiled `<torch/extension.h>`
  (hip_pch). nvcc on torch's full header plus pybind11's templates is most of a cold build (75 s ->
  ~30 s on a 2-core machine). Whatever the split cannot build is rebuilt with `full`, so it never costs
  a candidate its build;
- `lean` (cuda, only with `VerifierConfig.hip_lean_build`, before split): kernels in an nvcc unit
  without torch, their launchers (rewritten to cudaLaunchKernel) and the binding in one host unit
  with the precompiled header; hip_units.lean_parts says what it refuses. Compiled and symbol-checked
  here; not yet run on a GPU, hence off by default.

Each compiler call runs in its own process group with a timeout (sandbox.run_process). A scheme that
is not the last stops at its first failing unit; `speculative` runs the full build beside the earlier
ones (build_capture; docs/hip.md, "Compile errors").
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from amdkv.verify.backends.hip_pch import BUILD_VERSION, host_pch
from amdkv.verify.backends.hip_toolchain import (COMPAT_INCLUDE, BuildToolchain, build_cache_dir, compat_headers_hash,
                                                 host_compiler, torch_paths)
from amdkv.verify.backends.hip_units import SplitUnavailable, Unit, extension_units, module_name_for
from amdkv.verify.sandbox import ProcessResult, run_process

MAX_ERROR_CHARS = 6000
MAX_FALLBACK_REASON_CHARS = 1500


# ------------------------------------------------------------------------------------ compile
def _nm_symbols(obj: Path, *options: str) -> set[str]:
    """Demangled symbol names of `obj` (`nm -C`); OSError when nm is missing or fails."""
    r = run_process(["nm", "-C", *options, str(obj)], timeout=120)
    if r.returncode != 0:
        raise OSError(f"nm {obj.name}: {(r.stderr or r.stdout).strip()[:300]}")
    out = set()
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(?:[0-9a-fA-F]+\s+)?[A-Za-z]\s+(.+)$", line)
        if m:
            out.add(m.group(1).strip())
    return out


def names_function(symbol: str, name: str) -> bool:
    """True when the demangled `symbol` is the candidate's function `name`: plain (`f(int)`), in a
    namespace of its own (`ns::f(int)`; not torch's or the standard library's: a bound `relu` must not
    match the `at::relu` the binding calls) or a template specialisation, whose demangled form starts
    with its return type (`void k<float, 4>(float*)`)."""
    return symbol == name or re.match(rf"^(?:\S+\s+)?(?:(?!(?:at|c10|torch|std|pybind11)::)(?:[\w:]|\(anonymous "
                                      rf"namespace\))+::)?{re.escape(name)}(?:<.*>)?\(", symbol) is not None


def unresolved_bindings(binding_obj: Path, other_objs: list[Path], names: Iterable[str]) -> list[str]:
    """Bound functions the binding object refers to that no other object defines (exported).

    `c++ -shared` accepts undefined symbols, so a bound function that the device units do not export
    (an `inline`/`static` definition, another overload) would only fail when the sandbox imports the
    module; found here instead, so the build falls back to the full scheme."""
    names = list(names)
    wanted = {s for s in _nm_symbols(binding_obj, "--undefined-only") if any(names_function(s, n) for n in names)}
    defined: set[str] = set()
    for o in other_objs:
        defined |= _nm_symbols(o, "--defined-only", "--extern-only")
    return sorted(wanted - defined)


def _compile_one(u: Unit, tc: BuildToolchain, workdir: Path, module: str, extra: list[str], timeout: float,
                 cache_dir: Path | None, cancel: threading.Event | None = None) -> ProcessResult:
    src, obj = str(workdir / u.name), str(workdir / (u.name + ".o"))
    if u.kind == "device":
        return run_process(tc.compile_cmd(src, obj, module, tc.translate_flags(u.flags) + extra),
                           timeout=timeout, cwd=str(workdir), cancel=cancel)
    flags = tc.translate_flags(u.flags, host=True) + extra
    pch = host_pch(tc, extra, cache_dir=cache_dir, timeout=timeout)
    r = run_process(tc.host_compile_cmd(src, obj, module, flags, pch), timeout=timeout, cwd=str(workdir),
                    cancel=cancel)
    if pch and r.returncode != 0 and not r.cancelled and "internal compiler error" in r.stderr:
        # GCC 12 crashed (rarely, not reproducibly) on a fresh PCH here: once more without it
        r = run_process(tc.host_compile_cmd(src, obj, module, flags), timeout=timeout, cwd=str(workdir),
                        cancel=cancel)
    return r


def _unit_error(r: ProcessResult, timeout: float, failed_first: str | None) -> str | None:
    """A unit's error text: None when it compiled."""
    if r.returncode == 0 and not r.cancelled:
        return None
    if r.cancelled:
        return (f"stopped unfinished: unit {failed_first} failed first, so this scheme cannot build" if failed_first
                else "stopped unfinished: the build was no longer needed (an earlier scheme built)")
    return f"compiler timed out after {timeout:.0f} s" if r.timed_out else _trim(r.stderr or r.stdout)


def compile_units(units: list[Unit], tc: BuildToolchain, workdir: Path, module: str, *, timeout: float,
                  jobs: int = 2, extra: list[str] | None = None, cache_dir: Path | None = None,
                  fail_fast: bool = False,
                  cancel: threading.Event | None = None) -> tuple[list[tuple[str, str | None]], bool]:
    """Write and compile every unit in `workdir` (objects `<unit>.o`), `jobs` at a time:
    ([(unit name, error or None)], any timed out). A unit that only declares bound functions
    (`binds`) is then checked against the other objects (unresolved_bindings), as `[bindings]`.

    `fail_fast`: the first unit that fails stops the others (killed, or never started; their error
    says so). For a scheme that is not the last one, whose failure only means "try the next scheme":
    the next one starts as soon as the answer is known instead of after the slowest unit (a split's
    device unit fails in seconds while its host unit compiles for ~16 s). The last scheme's units all
    run to the end, so a `compile_error`'s diagnostics still hold every unit's messages.
    `cancel`: set by the caller, it stops every unit the same way (build_capture's speculative full
    build, once an earlier scheme has built)."""
    for u in units:
        (workdir / u.name).write_text(u.text)
    stop = cancel if cancel is not None else threading.Event() if fail_fast else None
    first_failed: list[str] = []

    def compile_unit(u: Unit) -> ProcessResult:
        if stop is not None and stop.is_set():  # stopped before this one started
            return ProcessResult(None, "", "", False, 0.0, cancelled=True)
        r = _compile_one(u, tc, workdir, module, extra or [], timeout, cache_dir, stop)
        if fail_fast and stop is not None and r.returncode != 0 and not r.cancelled and not stop.is_set():
            first_failed.append(u.name)
            stop.set()
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(units)))) as pool:
        results = list(zip(units, pool.map(compile_unit, units)))
    out: list[tuple[str, str | None]] = [
        (u.name, _unit_error(r, timeout, first_failed[0] if first_failed else None)) for u, r in results]
    if all(e is None for _, e in out):
        for u in (u for u in units if u.binds):
            others = [workdir / (o.name + ".o") for o in units if o is not u]
            try:
                missing = unresolved_bindings(workdir / (u.name + ".o"), others, u.binds)
                error = f"bound functions not exported by the other units: {missing}" if missing else None
            except OSError as exc:
                error = f"cannot check the binding's symbols: {exc}"
            out.append(("[bindings]", error))
    return out, any(r.timed_out for _, r in results)


# ------------------------------------------------------------------------------------ build
@dataclasses.dataclass
class BuildResult:
    """One captured call built (or not) into a shared library."""

    name: str                 # the candidate's extension name (load_inline's `name`)
    ok: bool
    so_path: str | None
    module_name: str | None
    error: str | None
    seconds: float
    cached: bool
    toolchain: str
    key: str
    timed_out: bool = False
    scheme: str = "full"      # "lean" | "split" | "full" (see the module docstring)
    fallback_reason: str | None = None  # why each earlier scheme was not used, when one was tried

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _trim(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "\n... (truncated)"


def build_key(units: list[Unit], tc: BuildToolchain) -> str:
    blob = json.dumps([BUILD_VERSION, [(u.name, u.kind, u.text, u.flags) for u in units], tc.identity,
                       compat_headers_hash() if tc.platform == "cuda" else "",
                       host_compiler() if tc.platform == "cuda" else "", torch_paths()["version"]])
    return hashlib.sha256(blob.encode()).hexdigest()


def _entry(cache: Path, key: str) -> Path:
    return cache / key[:2] / key


def _cached(cache: Path, key: str, name: str, t0: float) -> BuildResult | None:
    """The cached result under `key`, None on a miss or an unusable entry."""
    try:
        d = json.loads((_entry(cache, key) / "build.json").read_text())
        d.update(name=name, cached=True, seconds=round(time.monotonic() - t0, 3))
        if d.get("so_path"):
            d["so_path"] = str(_entry(cache, key) / Path(d["so_path"]).name)
        return BuildResult(**d)
    except (OSError, ValueError, TypeError, KeyError):  # missing or unreadable: a miss, rebuilt
        return None


def _publish(tmp: Path, cache: Path, key: str, res: BuildResult) -> None:
    """Write build.json in `tmp` and rename it to the entry of `key` (atomic; a concurrent builder of
    the same key may win, its result is as good)."""
    (tmp / "build.json").write_text(json.dumps(res.to_dict()))
    root = _entry(cache, key)
    try:
        os.rename(tmp, root)
    except OSError:
        if not (root / "build.json").is_file():
            raise


def _build_units(units: list[Unit], scheme: str, tc: BuildToolchain, name: str, cache: Path, *,
                 timeout: float, jobs: int, t0: float, last: bool,
                 cancel: threading.Event | None = None) -> BuildResult:
    """Compile, link and cache one scheme's units (no cache lookup). `last`: its result is the
    answer (all units run to the end); otherwise the first failing unit stops the rest (compile_units).
    `cancel` set while it compiles: a failed result that is not cached (it says nothing of the source)."""
    key = build_key(units, tc)
    module = module_name_for(units, key)
    _entry(cache, key).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=_entry(cache, key).parent))
    try:
        out, timed_out = compile_units(units, tc, tmp, module, timeout=timeout, jobs=jobs, cache_dir=cache,
                                       fail_fast=not last, cancel=cancel)
        if cancel is not None and cancel.is_set():
            return BuildResult(name, False, None, None, "cancelled: an earlier scheme built", round(time.monotonic() - t0, 3),
                               False, tc.identity, key, False, scheme)
        errors = [f"[{u}] {e}" for u, e in out if e]
        so = tmp / f"{module}.so"
        if not errors:
            objs = [str(tmp / (u.name + ".o")) for u in units]
            link = run_process(tc.link_cmd(objs, str(so)), timeout=timeout, cwd=str(tmp))
            if link.returncode != 0:
                errors.append(f"[link] {_trim(link.stderr or link.stdout)}")
                timed_out = link.timed_out
        res = BuildResult(name, not errors, str(_entry(cache, key) / so.name) if not errors else None,
                          module if not errors else None, "\n\n".join(errors) or None,
                          round(time.monotonic() - t0, 3), False, tc.identity, key, timed_out, scheme)
        if timed_out:  # may be the machine's fault: never cached
            return res
        for u in units:
            (tmp / (u.name + ".o")).unlink(missing_ok=True)
        _publish(tmp, cache, key, res)
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _scheme_units(capture: dict[str, Any], platform: str, scheme: str) -> tuple[list[Unit] | None, str | None]:
    """(units, None), or (None, why the scheme cannot be set up for this call)."""
    try:
        return extension_units(capture, platform, scheme), None
    except SplitUnavailable as exc:
        return None, str(exc)


def schemes_for(platform: str, lean: bool = False) -> tuple[str, ...]:
    """The build schemes tried in order; the last one's result is the answer. rocm: full only;
    cuda: split then full, with `lean` first when asked for (VerifierConfig.hip_lean_build)."""
    if platform != "cuda":
        return ("full",)
    return ("lean", "split", "full") if lean else ("split", "full")


def build_capture(capture: dict[str, Any], tc: BuildToolchain, *, cache_dir: Path | None = None,
                  timeout: float = 600.0, jobs: int = 2, lean: bool = False,
                  speculative: bool = False) -> BuildResult:
    """Build one captured call; never raises for a bad source (the error is in the result).

    Each scheme of `schemes_for` in turn: one that cannot be set up, or fails to compile, link or
    pass the symbol check, passes the call to the next; the full scheme's result (and error) is the
    answer. A failed scheme is cached like any result, so a repeat goes straight to the next one's
    entry. A timeout is the answer at once (the next scheme would be slower). `fallback_reason`
    says why each earlier scheme was not used.

    `speculative` (VerifierConfig.hip_speculative_full): when neither the first scheme nor the last
    is cached, the last (full) build starts at once beside the earlier ones and is stopped as soon as
    one of them builds. The answer is the same as in turn (an earlier scheme's success wins, else the
    full build's result); a candidate that does not compile gets it after the slower of the two
    instead of their sum, and one that builds pays the full build's compile until the earlier scheme
    is done (docs/hip.md, "Compile errors").

    Without it, the same happens from the moment a `lean` build fails (not when lean is refused up
    front): the full build starts beside the split one. A lean build that fails is mostly the
    candidate's own error, which only the full build reports (both compile errors of the GPU check,
    and no candidate that lean failed and split built, session 19), so the error comes after the
    slower of split and full instead of their sum, for about no extra CPU: the split build would have
    failed and the full one run anyway. Same answer as in turn, as above."""
    t0 = time.monotonic()
    name = str(capture.get("name", "ext"))
    cache = cache_dir or build_cache_dir()
    kw: dict[str, Any] = {"timeout": timeout, "jobs": jobs, "t0": t0}
    reasons: list[str] = []
    schemes = schemes_for(tc.platform, lean)
    plan: list[tuple[str, list[Unit] | None, str | None]] = []
    for scheme in schemes:
        try:
            plan.append((scheme, *_scheme_units(capture, tc.platform, scheme)))
        except ValueError as exc:
            return BuildResult(name, False, None, None, str(exc), 0.0, False, tc.identity, "")
    stop = threading.Event()
    ahead = _start_speculative(plan, tc, name, cache, stop, kw) if speculative else None
    try:
        for index, (scheme, units, why) in enumerate(plan):
            if units is None:
                reasons.append(f"{scheme}: {why}")
                continue
            last = scheme == schemes[-1]
            if last and ahead is not None:
                res = ahead.result()
            else:
                res = (_cached(cache, build_key(units, tc), name, t0)
                       or _build_units(units, scheme, tc, name, cache, last=last, **kw))
            if res.ok or res.timed_out or last:
                res.fallback_reason = _trim("; ".join(reasons), MAX_FALLBACK_REASON_CHARS) if reasons else None
                return res
            reasons.append(f"{scheme} build failed: {res.error}")
            if ahead is None and scheme == "lean":
                ahead = _start_speculative(plan[index + 1:], tc, name, cache, stop, kw)
    finally:
        if ahead is not None:
            stop.set()  # an earlier scheme answered: the full build is not needed
            concurrent.futures.wait([ahead])  # (its own failure, if any, no longer matters)
    raise AssertionError("the last scheme (full) always answers")


def _start_speculative(plan: list[tuple[str, list[Unit] | None, str | None]], tc: BuildToolchain, name: str,
                       cache: Path, stop: threading.Event,
                       kw: dict[str, Any]) -> concurrent.futures.Future[BuildResult] | None:
    """The last scheme's build started in a thread of its own, or None when it would not help: its
    result is cached, the first scheme of `plan` that can be set up is (a cached answer comes at
    once), or no scheme before the last can be set up (the full build is next anyway)."""
    last_scheme, last_units, _ = plan[-1]
    earlier = [units for scheme, units, _ in plan[:-1] if units is not None]
    if last_units is None or not earlier or _cached(cache, build_key(last_units, tc), name, 0.0) is not None:
        return None
    if _cached(cache, build_key(earlier[0], tc), name, 0.0) is not None:
        return None
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="amdkv-hip-full")
    future = pool.submit(_build_units, last_units, last_scheme, tc, name, cache, last=True, cancel=stop, **kw)
    pool.shutdown(wait=False)  # the thread ends with its build
    return future


def build_captures(captures: list[dict[str, Any]], tc: BuildToolchain, **kw: Any) -> list[BuildResult]:
    """Build every captured call (in order: the worker hands them out in the same order)."""
    return [build_capture(c, tc, **kw) for c in captures]


def compile_only(capture: dict[str, Any], tc: BuildToolchain, *, timeout: float = 600.0,
                 extra_includes: tuple[str, ...] = (), scheme: str = "auto",
                 jobs: int = 2) -> list[tuple[str, str | None]]:
    """Compile (no link) every unit of one captured call: [(unit name, error or None)].

    For machines without a GPU runtime to link against (CI): checks that the compat layer and
    the candidate's sources go through nvcc for the target arch. `scheme`: "lean", "split", "full",
    or "auto" (as build_capture with its default schemes: split on cuda, the full scheme when the
    split cannot be set up or fails); the unit names tell which (`binding.cpp`/`main.cpp` exist only
    in the split, `*_kernels.cu` only in the lean scheme)."""
    schemes = list(schemes_for(tc.platform)) if scheme == "auto" else [scheme]
    extra = [f"-I{os.path.abspath(d)}" for d in extra_includes]  # units compile in a temp dir
    out: list[tuple[str, str | None]] = []
    for s in schemes:
        units, why = _scheme_units(capture, tc.platform, s)
        if units is None:
            out = [(f"[{s}]", why)]
            continue
        with tempfile.TemporaryDirectory(prefix="amdkv-hipco-") as tmp:
            out, _ = compile_units(units, tc, Path(tmp), "amdkv_hip_compile_only", timeout=timeout, jobs=jobs,
                                   extra=extra)
        if all(e is None for _, e in out):
            break
    return out


def device_split_compile(capture: dict[str, Any], tc: BuildToolchain, *, timeout: float = 300.0) -> list[tuple[str, str | None]]:
    """Compile only the device side of every unit (torch-using host code blanked, see
    hip_sources.device_only_source) with nvcc + the compat headers: ~1-3 s instead of a minute
    for a full torch-extension unit. CI uses it to check the compat layer on every kernel."""
    from amdkv.verify.backends.hip_sources import device_only_source

    out = []
    with tempfile.TemporaryDirectory(prefix="amdkv-hipds-") as tmp:
        for u in extension_units(capture, tc.platform):
            text, _ = device_only_source(u.text)
            src = os.path.join(tmp, u.name)
            Path(src).write_text(text)
            code = tc.arch.replace("sm_", "")
            cmd = [tc.compiler, "-x", "cu", "-c", src, "-o", src + ".o", "-O3", torch_paths()["cxx_std"],
                   f"-gencode=arch=compute_{code},code=sm_{code}", "--expt-relaxed-constexpr", f"-I{COMPAT_INCLUDE}",
                   *tc.translate_flags(u.flags)]
            r = run_process(cmd, timeout=timeout, cwd=tmp)
            out.append((u.name, None if r.returncode == 0 else ("timed out" if r.timed_out else _trim(r.stderr or r.stdout))))
    return out
