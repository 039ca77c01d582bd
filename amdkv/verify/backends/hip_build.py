"""Build captured HIP `load_inline`/`load` sources into a loadable torch extension (trusted side).

Two toolchains share this code:
- `cuda`: nvcc + amdkv's HIP-on-CUDA compatibility headers (`hip_compat/include`), for NVIDIA GPUs;
- `rocm`: a real hipcc for the local AMD GPU (`--offload-arch` = torch's `gcnArchName`).

Why our own nvcc/hipcc commands rather than `torch.utils.cpp_extension.load_inline`: that function
compiles KernelBench's HIP style (`__global__` code in `cpp_sources`, `CXX=hipcc`) with the host C++
compiler on a CUDA build of torch, which fails; and it imports the module into the calling process,
which must not be the trusted parent. Here every unit with GPU code is compiled as CUDA/HIP, the
result is a plain `.so` the candidate's sandboxed worker loads (backends/hip_run.py), and results
are cached by content: sources, flags, compiler identity, compatibility headers, torch version, arch.

Each compiler call runs in its own process group with a timeout (sandbox.run_process).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from amdkv.errors import InfrastructureError
from amdkv.verify.backends.hip_sources import safe_flags
from amdkv.verify.sandbox import run_process

BUILD_VERSION = 1
COMPAT_INCLUDE = Path(__file__).resolve().parent / "hip_compat" / "include"
MAX_ERROR_CHARS = 6000
PYBIND_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)")
DEVICE_CODE = re.compile(r"__global__|__device__|hipLaunchKernelGGL|<<<")
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)


def build_cache_dir() -> Path:
    """`$AMDKV_CACHE_DIR/hipbuild` (default ~/.cache/amdkv/hipbuild)."""
    root = os.environ.get("AMDKV_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "amdkv")
    return Path(root) / "hipbuild"


@functools.lru_cache(maxsize=1)
def compat_headers_hash() -> str:
    """Hash of the compatibility headers: a change to them invalidates cached builds."""
    h = hashlib.sha256()
    for p in sorted(COMPAT_INCLUDE.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(COMPAT_INCLUDE)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _torch_paths() -> dict[str, Any]:
    import torch
    import torch.utils.cpp_extension as ce

    root = Path(torch.__file__).resolve().parent
    cxx_std = "-std=c++20" if "-std=c++20" in Path(ce.__file__).read_text() else "-std=c++17"
    return {"include": [str(root / "include"), str(root / "include" / "torch" / "csrc" / "api" / "include")],
            "lib": str(root / "lib"), "version": torch.__version__, "cxx_std": cxx_std,
            "abi": int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))),
            "python_include": sysconfig.get_paths()["include"]}


@dataclasses.dataclass(frozen=True)
class BuildToolchain:
    """One compiler able to turn HIP sources into a torch extension for one GPU arch."""

    platform: str          # "cuda" (nvcc + compat headers) | "rocm" (hipcc)
    compiler: str          # absolute path of nvcc / hipcc
    version: str           # first line of `--version` that names the release
    arch: str              # sm_90 | gfx942 ...
    home: str              # CUDA or ROCm root (for libraries)

    @property
    def identity(self) -> str:
        return f"{self.platform}|{self.compiler}|{self.version}|{self.arch}"

    def compile_cmd(self, src: str, obj: str, module_name: str, extra: list[str]) -> list[str]:
        """The compiler command for one unit (device + host code, position-independent)."""
        tp = _torch_paths()
        common = ["-c", src, "-o", obj, "-O3", tp["cxx_std"], f"-DTORCH_EXTENSION_NAME={module_name}",
                  "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={tp['abi']}"]
        incs = [f"-I{p}" for p in tp["include"]] + [f"-I{tp['python_include']}"]
        if self.platform == "cuda":
            code = self.arch.replace("sm_", "")
            return [self.compiler, "-x", "cu", *common, f"-gencode=arch=compute_{code},code=sm_{code}",
                    "--expt-relaxed-constexpr", "--expt-extended-lambda", "-Xcompiler", "-fPIC",
                    "-DAMDKV_HIP_TORCH_STREAM=1", f"-I{COMPAT_INCLUDE}", *incs,
                    f"-I{os.path.join(self.home, 'include')}", *extra]
        return [self.compiler, "-x", "hip", *common, f"--offload-arch={self.arch}", "-fPIC",
                "-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", *incs, *extra]

    def link_cmd(self, objs: list[str], so: str) -> list[str]:
        """Link the objects into a shared library against torch and the GPU runtime."""
        tp = _torch_paths()
        torch_libs = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
        if self.platform == "cuda":
            libdirs = [os.path.join(self.home, "lib64"), os.path.join(self.home, "targets", "x86_64-linux", "lib")]
            return ["c++" if shutil.which("c++") else "g++", "-shared", *objs, "-o", so, f"-L{tp['lib']}",
                    *torch_libs, "-lc10_cuda", "-ltorch_cuda", *[f"-L{d}" for d in libdirs if os.path.isdir(d)],
                    "-lcudart"]
        return [self.compiler, "-shared", *objs, "-o", so, f"-L{tp['lib']}", *torch_libs, "-lc10_hip",
                "-ltorch_hip", f"-L{os.path.join(self.home, 'lib')}", "-lamdhip64"]

    def translate_flags(self, flags: list[str]) -> list[str]:
        """The candidate's safe flags (hip_sources.safe_flags) in this compiler's spelling."""
        if self.platform == "rocm":
            return flags
        out = []
        for f in flags:
            if f == "-ffast-math":
                out.append("--use_fast_math")
            elif f == "-fgpu-flush-denormals-to-zero":
                out.append("-ftz=true")
            elif f.startswith(("-D", "-U", "-std=")):
                out.append(f)
            # clang-only (-munsafe-fp-atomics, -ffp-contract=, warnings) have no nvcc meaning
        return out


def _first_version_line(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise InfrastructureError(f"{exe} --version failed: {exc}", hint="check the toolkit install") from exc
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return next((ln for ln in lines if "release" in ln or "HIP version" in ln), lines[-1] if lines else "?")


def nvcc_toolchain(arch: str | None = None) -> BuildToolchain:
    """nvcc from `CUDA_HOME`/`CUDA_PATH`, PATH or /usr/local/cuda; arch from the local GPU (sm_90 on H200)."""
    cands = [os.path.join(os.environ[v], "bin", "nvcc") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    cands += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc"]
    nvcc = next((c for c in cands if c and os.path.isfile(c)), None)
    if nvcc is None:
        raise InfrastructureError("nvcc was not found (CUDA_HOME, PATH, /usr/local/cuda)",
                                  hint="install the CUDA toolkit or set CUDA_HOME; HIP candidates are built with nvcc "
                                       "on NVIDIA GPUs")
    if arch is None:
        import torch

        major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)
        arch = f"sm_{major}{minor}"
    return BuildToolchain("cuda", nvcc, _first_version_line(nvcc), arch, str(Path(nvcc).resolve().parent.parent))


def hipcc_toolchain(arch: str | None = None) -> BuildToolchain:
    """hipcc of the local ROCm install; arch from `torch.cuda.get_device_properties(0).gcnArchName`
    (features such as `:sramecc+:xnack-` are kept: --offload-arch accepts them)."""
    home = os.environ.get("ROCM_PATH") or os.environ.get("ROCM_HOME") or "/opt/rocm"
    cands = [os.path.join(home, "bin", "hipcc"), shutil.which("hipcc") or ""]
    hipcc = next((c for c in cands if c and os.path.isfile(c)), None)
    if hipcc is None:
        raise InfrastructureError(f"hipcc was not found ({home}/bin, PATH)",
                                  hint="install ROCm or set ROCM_PATH; HIP candidates are built with hipcc on AMD GPUs")
    if arch is None:
        import torch

        arch = torch.cuda.get_device_properties(0).gcnArchName
    return BuildToolchain("rocm", hipcc, _first_version_line(hipcc), arch, home)


def toolchain_for_platform(platform: str, arch: str | None = None) -> BuildToolchain:
    return nvcc_toolchain(arch) if platform == "cuda" else hipcc_toolchain(arch)


# ------------------------------------------------------------------------------------ sources
def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def route_launches_to_current_stream(src: str) -> str:
    """`k<<<g, b>>>` / `<<<g, b, s>>>` / `<<<g, b, s, st>>>` -> the 4-argument form whose stream is
    `amdkv_hip_stream(st)` (the compat header maps the null stream to torch's current stream).
    Why: a launch on the legacy null stream while torch captures a CUDA graph for timing breaks the
    capture; on AMD with torch the null stream is torch's default stream, so meaning is unchanged."""

    def fix(m: re.Match) -> str:
        args = _split_top_level(m.group(1))
        if len(args) == 2:
            args += ["0", "amdkv_hip_stream(0)"]
        elif len(args) == 3:
            args.append("amdkv_hip_stream(0)")
        elif len(args) == 4 and "amdkv_hip_stream" not in args[3]:
            args[3] = f"amdkv_hip_stream({args[3].strip()})"
        return "<<<" + ",".join(args) + ">>>"

    return LAUNCH.sub(fix, src)


def _binding(functions: Any) -> str:
    if not functions:
        return ""
    items = functions.items() if isinstance(functions, dict) else ((f, f) for f in functions)
    defs = "\n".join(f'  m.def("{n}", torch::wrap_pybind_function({n}), "{str(d).replace(chr(34), "")}");'
                     for n, d in items)
    return f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n"


@dataclasses.dataclass
class Unit:
    name: str       # file name inside the build dir
    text: str
    flags: list[str]


def extension_units(capture: dict[str, Any], platform: str) -> list[Unit]:
    """The files one captured call compiles, every one as CUDA/HIP (KernelBench's `cpp_sources`
    hold `__global__` code). `cpp_sources` + the generated binding -> main; `cuda_sources` -> cuda."""
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = "#include <hip/hip_runtime.h>\n" if platform == "cuda" else ""
    units: list[Unit] = []
    if capture.get("api") == "load":
        for i, f in enumerate(capture.get("sources", [])):
            text = f.get("text")
            if text is None:
                raise ValueError(f"source {f.get('path')} could not be read: {f.get('error')}")
            is_dev = f.get("path", "").endswith((".cu", ".hip", ".cuh")) or DEVICE_CODE.search(text)
            flags = capture.get("extra_cuda_cflags" if is_dev else "extra_cflags", [])
            units.append(Unit(f"src{i}{ext}", prelude + text, safe_flags(flags)[0]))
        return units
    cpp = "\n".join(capture.get("cpp_sources", []))
    units.append(Unit(f"main{ext}", "#include <torch/extension.h>\n" + prelude + cpp + _binding(capture.get("functions")),
                      safe_flags(capture.get("extra_cflags", []))[0]))
    cuda = "\n".join(capture.get("cuda_sources", []))
    if cuda.strip():
        units.append(Unit(f"cuda{ext}", "#include <torch/types.h>\n#include <hip/hip_runtime.h>\n" + cuda,
                          safe_flags(capture.get("extra_cuda_cflags", []))[0]))
    if platform == "cuda":
        for u in units:
            u.text = route_launches_to_current_stream(u.text)
    return units


def module_name_for(units: list[Unit], key: str) -> str:
    """The Python module name: the candidate's own `PYBIND11_MODULE(name, ...)` when it hard-codes
    one (its `PyInit_<name>` decides), else a content-derived unique name."""
    for u in units:
        for m in PYBIND_MODULE.finditer(u.text):
            if m.group(1) != "TORCH_EXTENSION_NAME":
                return m.group(1)
    return f"amdkv_hip_{key[:16]}"


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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "\n... (truncated)"


def build_key(units: list[Unit], tc: BuildToolchain) -> str:
    blob = json.dumps([BUILD_VERSION, [(u.name, u.text, u.flags) for u in units], tc.identity,
                       compat_headers_hash() if tc.platform == "cuda" else "", _torch_paths()["version"]])
    return hashlib.sha256(blob.encode()).hexdigest()


def build_capture(capture: dict[str, Any], tc: BuildToolchain, *, cache_dir: Path | None = None,
                  timeout: float = 600.0, jobs: int = 2) -> BuildResult:
    """Build one captured call; never raises for a bad source (the error is in the result)."""
    t0 = time.monotonic()
    name = str(capture.get("name", "ext"))
    try:
        units = extension_units(capture, tc.platform)
    except ValueError as exc:
        return BuildResult(name, False, None, None, str(exc), 0.0, False, tc.identity, "")
    key = build_key(units, tc)
    root = (cache_dir or build_cache_dir()) / key[:2] / key
    meta = root / "build.json"
    if meta.is_file():
        try:
            d = json.loads(meta.read_text())
            d.update(name=name, cached=True, seconds=round(time.monotonic() - t0, 3))
            if d.get("so_path"):
                d["so_path"] = str(root / Path(d["so_path"]).name)
            return BuildResult(**d)
        except (OSError, ValueError, TypeError):  # unreadable cache entry: a miss, rebuilt below
            pass
    module = module_name_for(units, key)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=root.parent if _mkdir(root.parent) else None))
    try:
        for u in units:
            (tmp / u.name).write_text(u.text)

        def compile_one(u: Unit):
            cmd = tc.compile_cmd(str(tmp / u.name), str(tmp / (u.name + ".o")), module, tc.translate_flags(u.flags))
            return u, run_process(cmd, timeout=timeout, cwd=str(tmp))

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(units)))) as pool:
            results = list(pool.map(compile_one, units))
        errors = [f"[{u.name}] {_trim(r.stderr or r.stdout)}" if not r.timed_out else
                  f"[{u.name}] compiler timed out after {timeout:.0f} s" for u, r in results if r.returncode != 0]
        timed_out = any(r.timed_out for _, r in results)
        so = tmp / f"{module}.so"
        if not errors:
            link = run_process(tc.link_cmd([str(tmp / (u.name + ".o")) for u in units], str(so)),
                               timeout=timeout, cwd=str(tmp))
            if link.returncode != 0:
                errors.append(f"[link] {_trim(link.stderr or link.stdout)}")
                timed_out = link.timed_out
        res = BuildResult(name, not errors, str(root / so.name) if not errors else None,
                          module if not errors else None, "\n\n".join(errors) or None,
                          round(time.monotonic() - t0, 3), False, tc.identity, key, timed_out)
        if timed_out:  # may be the machine's fault: never cached
            return res
        for u in units:
            (tmp / (u.name + ".o")).unlink(missing_ok=True)
        (tmp / "build.json").write_text(json.dumps(res.to_dict()))
        try:
            os.rename(tmp, root)  # atomic publish; a concurrent builder of the same key may win
        except OSError:
            if not meta.is_file():
                raise
        return res
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mkdir(p: Path) -> bool:
    p.mkdir(parents=True, exist_ok=True)
    return True


def build_captures(captures: list[dict[str, Any]], tc: BuildToolchain, **kw: Any) -> list[BuildResult]:
    """Build every captured call (in order: the worker hands them out in the same order)."""
    return [build_capture(c, tc, **kw) for c in captures]


def compile_only(capture: dict[str, Any], tc: BuildToolchain, *, timeout: float = 600.0,
                 extra_includes: tuple[str, ...] = ()) -> list[tuple[str, str | None]]:
    """Compile (no link) every unit of one captured call: [(unit name, error or None)].

    For machines without a GPU runtime to link against (CI): checks that the compat layer and
    the candidate's sources go through nvcc for the target arch."""
    units = extension_units(capture, tc.platform)
    out = []
    with tempfile.TemporaryDirectory(prefix="amdkv-hipco-") as tmp:
        for u in units:
            src = os.path.join(tmp, u.name)
            Path(src).write_text(u.text)
            r = run_process(tc.compile_cmd(src, src + ".o", "amdkv_hip_compile_only",
                                            tc.translate_flags(u.flags) + [f"-I{d}" for d in extra_includes]),
                            timeout=timeout, cwd=tmp)
            out.append((u.name, None if r.returncode == 0 else
                        ("timed out" if r.timed_out else _trim(r.stderr or r.stdout))))
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
            cmd = [tc.compiler, "-x", "cu", "-c", src, "-o", src + ".o", "-O3", _torch_paths()["cxx_std"],
                   f"-gencode=arch=compute_{code},code=sm_{code}", "--expt-relaxed-constexpr", f"-I{COMPAT_INCLUDE}",
                   *tc.translate_flags(u.flags)]
            r = run_process(cmd, timeout=timeout, cwd=tmp)
            out.append((u.name, None if r.returncode == 0 else ("timed out" if r.timed_out else _trim(r.stderr or r.stdout))))
    return out
