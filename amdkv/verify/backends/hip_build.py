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

Two build schemes (docs/hip.md, "Build speed"):
- `full` (rocm always; cuda fallback): every unit through nvcc/hipcc, the main unit with
  `<torch/extension.h>` and the generated `PYBIND11_MODULE` — what `load_inline` compiles;
- `split` (cuda first): units with device code through nvcc with the light `<torch/types.h>`, the
  binding and host-only units through the host C++ compiler with a precompiled `<torch/extension.h>`.
  nvcc on torch's full header plus pybind11's templates is most of a cold build (75 s -> ~30 s on a
  2-core machine). Whatever the split cannot build is rebuilt with `full`, so it never costs a candidate
  its build.

Each compiler call runs in its own process group with a timeout (sandbox.run_process).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from amdkv.errors import InfrastructureError
from amdkv.verify.backends.hip_sources import _mask_comments_strings, safe_flags
from amdkv.verify.sandbox import ProcessResult, run_process

BUILD_VERSION = 2  # 2: split scheme (unit kinds, host compiler in the key)
COMPAT_INCLUDE = Path(__file__).resolve().parent / "hip_compat" / "include"
MAX_ERROR_CHARS = 6000
MAX_FALLBACK_REASON_CHARS = 1500
PYBIND_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)")
DEVICE_CODE = re.compile(r"__global__|__device__|hipLaunchKernelGGL|<<<")
# headers whose templates launch kernels: a unit including them needs nvcc even without `__global__`
DEVICE_HEADER = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](hipcub|cub|thrust|rocprim|cooperative_groups)\b'
                           r'|^[ \t]*#[ \t]*include[ \t]*[<"]hip/hip_cooperative_groups\.h', re.M)
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)
EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][^\n]*$', re.M)
PREPROCESSOR_LINE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
FULL_HEADER = "#include <torch/extension.h>\n"
LIGHT_HEADER = "#include <torch/types.h>\n"
HIP_PRELUDE = "#include <hip/hip_runtime.h>\n"
# The compat header's float atomicMax/atomicMin helpers are device functions whose bodies name CUDA
# intrinsics that only nvcc declares; a host compiler parses those bodies (never calls them) and only
# needs the names. Without this, a host unit could not include <hip/hip_runtime.h>.
HOST_SHIM = ("#if !defined(__CUDACC__)\n"
             "int atomicCAS(int*, int, int);\nfloat __int_as_float(int);\nint __float_as_int(float);\n"
             "#endif\n")
# First lines of every host unit, and the text of their precompiled header (host_pch).
HOST_PRELUDE = FULL_HEADER + HOST_SHIM + HIP_PRELUDE
PCH_HEADER = "amdkv_host_prelude.h"
# Words before a bound function's name that make a forward declaration in another unit wrong or
# unresolvable at link time (internal linkage, not emitted, device-only, C linkage, a template).
# Namespace-scope `using` of torch/std names: copied into the binding unit so that declarations such
# as `Tensor f(Tensor x);` (after `using namespace torch;`) mean there what they meant in the source.
USING_HEADER_NAMES = re.compile(r"\busing\s+(?:namespace\s+)?(?:std|torch|at|c10)\b[\w:\s]*;")
NOT_DECLARABLE = re.compile(r"\b(static|inline|__inline__|__forceinline__|template|constexpr|consteval|__global__|"
                            r"__device__|extern|friend|virtual|operator|typedef|using|return)\b|[=().]|->")


class SplitUnavailable(Exception):
    """The split scheme cannot be set up for this call (a bound function's definition was not found or
    cannot be declared elsewhere): it is built with the full scheme."""


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


@functools.lru_cache(maxsize=1)
def host_compiler() -> tuple[str, str]:
    """(path, first line of `--version`) of the host C++ compiler (`c++`, else `g++`): it links every
    cuda build and compiles the split scheme's host units, so its identity is part of the cache keys."""
    cxx = shutil.which("c++") or shutil.which("g++") or "g++"
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return cxx, "?"  # a missing compiler shows up as a compile error of the host unit (-> full scheme)
    return cxx, (out.splitlines() or ["?"])[0].strip()  # not resolved: a ccache link needs its name


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
        """The device compiler's command for one unit (device + host code, position-independent)."""
        tp = _torch_paths()
        common = ["-c", src, "-o", obj, "-O3", tp["cxx_std"], f"-DTORCH_EXTENSION_NAME={module_name}",
                  "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={tp['abi']}"]
        if self.platform == "cuda":
            code = self.arch.replace("sm_", "")
            return [self.compiler, "-x", "cu", *common, f"-gencode=arch=compute_{code},code=sm_{code}",
                    "--expt-relaxed-constexpr", "--expt-extended-lambda", "-Xcompiler", "-fPIC",
                    "-DAMDKV_HIP_TORCH_STREAM=1", f"-I{COMPAT_INCLUDE}", *_torch_includes(),
                    f"-I{os.path.join(self.home, 'include')}", *extra]
        return [self.compiler, "-x", "hip", *common, f"--offload-arch={self.arch}", "-fPIC",
                "-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", *_torch_includes(), *extra]

    def host_flags(self) -> list[str]:
        """Host C++ compiler flags of the split scheme's host units, shared with their precompiled
        header (GCC uses a PCH only when built with the same options). -O3 as for nvcc units: the
        binding's argument conversion is part of every timed call."""
        if self.platform != "cuda":
            raise ValueError("host units exist only in the split scheme of platform cuda")
        tp = _torch_paths()
        return ["-O3", tp["cxx_std"], "-fPIC", "-DTORCH_API_INCLUDE_EXTENSION_H",
                f"-D_GLIBCXX_USE_CXX11_ABI={tp['abi']}", "-DAMDKV_HIP_TORCH_STREAM=1", f"-I{COMPAT_INCLUDE}",
                *_torch_includes(), *[f"-I{d}" for d in nvcc_include_dirs(self.compiler, self.home)]]

    def host_compile_cmd(self, src: str, obj: str, module_name: str, extra: list[str],
                         pch: Path | None = None) -> list[str]:
        """The host C++ compiler's command for a host-only unit; `pch`: the precompiled HOST_PRELUDE
        (host_pch), force-included; GCC falls back to the text header (with a warning) if it is invalid."""
        use_pch = ["-include", str(pch), "-Winvalid-pch"] if pch else []
        return [host_compiler()[0], "-x", "c++", "-c", src, "-o", obj, *self.host_flags(),
                f"-DTORCH_EXTENSION_NAME={module_name}", *use_pch, *extra]

    def link_cmd(self, objs: list[str], so: str) -> list[str]:
        """Link the objects into a shared library against torch and the GPU runtime."""
        tp = _torch_paths()
        torch_libs = ["-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
        if self.platform == "cuda":
            libdirs = [os.path.join(self.home, "lib64"), os.path.join(self.home, "targets", "x86_64-linux", "lib")]
            return [host_compiler()[0], "-shared", *objs, "-o", so, f"-L{tp['lib']}", *torch_libs, "-lc10_cuda",
                    "-ltorch_cuda", *[f"-L{d}" for d in libdirs if os.path.isdir(d)], "-lcudart"]
        return [self.compiler, "-shared", *objs, "-o", so, f"-L{tp['lib']}", *torch_libs, "-lc10_hip",
                "-ltorch_hip", f"-L{os.path.join(self.home, 'lib')}", "-lamdhip64"]

    def translate_flags(self, flags: list[str], *, host: bool = False) -> list[str]:
        """The candidate's safe flags (hip_sources.safe_flags) in this compiler's spelling; `host`: for
        the host C++ compiler, which gets only macros and the language standard (its units hold no
        kernel, and math flags would only invalidate the precompiled header)."""
        if self.platform == "rocm":
            return flags
        out = []
        for f in flags:
            if f.startswith(("-D", "-U", "-std=")):
                out.append(f)
            elif host:
                continue
            elif f == "-ffast-math":
                out.append("--use_fast_math")
            elif f == "-fgpu-flush-denormals-to-zero":
                out.append("-ftz=true")
            # clang-only (-munsafe-fp-atomics, -ffp-contract=, warnings) have no nvcc meaning
        return out


@functools.lru_cache(maxsize=4)
def nvcc_include_dirs(nvcc: str, home: str) -> tuple[str, ...]:
    """The CUDA include directories nvcc adds by itself (`nvcc -v --dryrun`: INCLUDES and, CUDA 13's
    CCCL, SYSTEM_INCLUDES): the host compiler needs the same ones to read <cuda_runtime.h> and
    thrust/cub headers. `home`/include (+ /cccl) when nvcc does not say (e.g. a wrapper script)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        r = subprocess.run([nvcc, "-v", "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                           capture_output=True, text=True, timeout=60)
        dirs: list[str] = []
        for m in re.finditer(r"^#\$ (?:SYSTEM_)?INCLUDES=(.*)$", r.stdout + r.stderr, re.M):
            words = shlex.split(m.group(1))
            dirs += [w[2:] if w.startswith("-I") else w for w in words if w not in ("-isystem", "-I")]
        dirs = [os.path.normpath(d) for d in dirs if d and os.path.isdir(d)]
        if dirs:
            return tuple(dict.fromkeys(dirs))
    return tuple(d for d in (os.path.join(home, "include"), os.path.join(home, "include", "cccl")) if os.path.isdir(d))


def _torch_includes() -> list[str]:
    tp = _torch_paths()
    return [f"-I{p}" for p in tp["include"]] + [f"-I{tp['python_include']}"]


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


def _function_names(functions: Any) -> list[str]:
    return list(functions.keys() if isinstance(functions, dict) else functions or [])


@dataclasses.dataclass
class Unit:
    name: str       # file name inside the build dir
    text: str
    flags: list[str]
    kind: str = "device"            # "device": nvcc/hipcc | "host": the host C++ compiler (split scheme)
    binds: tuple[str, ...] = ()     # bound functions this unit only declares (checked after compiling)


# ------------------------------------------------------------------------------------ declarations
def _code_only(src: str) -> str:
    """Same length as `src`: comments and literals blanked, preprocessor lines turned into NUL
    (a statement boundary for the declaration scan)."""
    return PREPROCESSOR_LINE.sub(lambda m: "\x00" * len(m.group(0)), _mask_comments_strings(src))


def _strip_comments(code: str) -> str:
    """`code` without comments, string and char literals kept (default arguments may hold them)."""
    return COMMENT_OR_LITERAL.sub(lambda m: " " if m.group(0).startswith("/") else m.group(0), code)


def _matching_paren(code: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return None


def function_declaration(name: str, src: str) -> str | None:
    """`ret name(params);` for the first namespace-scope definition of `name` in `src`, None when there
    is none. Raises SplitUnavailable when the definition exists but a declaration of it in another
    unit would not link to it (static, inline, template, `extern "C"`, inside a namespace or class)."""
    code = _code_only(src)
    nested = False
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", code):
        if code[:m.start()].rstrip().endswith(("::", ".", "->", "~")):
            continue  # a member or qualified name, not our free function
        close = _matching_paren(code, m.end() - 1)
        tail = re.match(r"(\s*noexcept\b)?(\s*->[^{};]*)?\s*\{", code[close + 1:]) if close is not None else None
        if tail is None:
            continue  # a call or a declaration, not the definition
        if code.count("{", 0, m.start()) != code.count("}", 0, m.start()):
            nested = True  # a method, or a function in a namespace: the binding's unqualified name is not it
            continue
        start = max(code.rfind(c, 0, m.start()) for c in ";{}\x00") + 1
        prefix = re.sub(r"\b__host__\b", " ", code[start:m.start()]).strip()
        if not prefix or NOT_DECLARABLE.search(prefix):
            raise SplitUnavailable(f"bound function {name!r} cannot be declared in the binding unit "
                                   f"({' '.join(prefix.split()) or 'no return type'})")
        decl = _strip_comments(src[start:close + 1 + tail.end() - 1])
        decl = re.sub(r"\b__host__\b", " ", decl)
        return " ".join(decl.split()) + ";"
    if nested:
        raise SplitUnavailable(f"bound function {name!r} is defined only inside a namespace or class")
    return None


def bound_function_declarations(functions: Any, sources: Iterable[str]) -> str:
    """Forward declarations of every bound function, taken from its definition in `sources`, after the
    sources' namespace-scope `using` of torch/std names: the split scheme's binding unit is compiled
    apart from the units that define them."""
    sources = list(sources)
    out = []
    for code in map(_code_only, sources):
        out += [" ".join(m.group(0).split()) for m in USING_HEADER_NAMES.finditer(code)
                if code.count("{", 0, m.start()) == code.count("}", 0, m.start())]
    out = list(dict.fromkeys(out))
    for name in _function_names(functions):
        decl = next((d for s in sources if (d := function_declaration(name, s))), None)
        if decl is None:
            raise SplitUnavailable(f"no definition of bound function {name!r} found in the sources")
        out.append(decl)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ units
def _needs_device_compiler(text: str) -> bool:
    return bool(DEVICE_CODE.search(text) or DEVICE_HEADER.search(text))


def _light(body: str) -> tuple[str, str]:
    """(torch header, body) of a split-scheme device unit: `<torch/types.h>` (nvcc on it takes ~30 s
    instead of ~75 s for `<torch/extension.h>` + pybind11), also in place of the candidate's own
    `#include <torch/extension.h>`; a unit with its own PYBIND11_MODULE keeps the full header."""
    if PYBIND_MODULE.search(body):
        return FULL_HEADER, body
    return LIGHT_HEADER, EXTENSION_INCLUDE.sub(LIGHT_HEADER.strip(), body)


def _inline_units(capture: dict[str, Any], platform: str, split: bool) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    cpp = "\n".join(capture.get("cpp_sources", []))
    cuda = "\n".join(capture.get("cuda_sources", []))
    functions = capture.get("functions")
    cflags = safe_flags(capture.get("extra_cflags", []))[0]
    units: list[Unit] = []
    if not split:
        units.append(Unit(f"main{ext}", FULL_HEADER + prelude + cpp + _binding(functions), cflags))
    elif _needs_device_compiler(cpp):  # KernelBench style: kernels in cpp_sources; binding apart
        header, body = _light(cpp)
        units.append(Unit("main.cu", header + prelude + body, cflags))
        if functions:
            decls = bound_function_declarations(functions, [cpp, cuda])
            units.append(Unit("binding.cpp", HOST_PRELUDE + decls + _binding(functions), cflags, "host",
                              tuple(_function_names(functions))))
    else:  # declarations (cuda_sources style) or host code: the binding stays with them
        units.append(Unit("main.cpp", HOST_PRELUDE + cpp + _binding(functions), cflags, "host"))
    if cuda.strip():
        header, body = _light(cuda) if split else (LIGHT_HEADER, cuda)
        units.append(Unit(f"cuda{ext}", header + HIP_PRELUDE + body,
                          safe_flags(capture.get("extra_cuda_cflags", []))[0]))
    return units


def _load_units(capture: dict[str, Any], platform: str, split: bool) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    units = []
    for i, f in enumerate(capture.get("sources", [])):
        text = f.get("text")
        if text is None:
            raise ValueError(f"source {f.get('path')} could not be read: {f.get('error')}")
        is_dev = f.get("path", "").endswith((".cu", ".hip", ".cuh")) or _needs_device_compiler(text)
        flags = safe_flags(capture.get("extra_cuda_cflags" if is_dev else "extra_cflags", []))[0]
        if split and not is_dev:
            units.append(Unit(f"src{i}.cpp", HOST_PRELUDE + text, flags, "host"))
        else:  # `load` sources include torch themselves: only their torch/extension.h is lightened
            body = _light(text)[1] if split else text
            units.append(Unit(f"src{i}{ext}", prelude + body, flags))
    return units


def extension_units(capture: dict[str, Any], platform: str, scheme: str = "full") -> list[Unit]:
    """The files one captured call compiles.

    `full`: every unit as CUDA/HIP (KernelBench's `cpp_sources` hold `__global__` code);
    `cpp_sources` + the generated binding -> main, `cuda_sources` -> cuda. `split` (platform cuda
    only): units with device code through nvcc with `<torch/types.h>`, and the binding, with forward
    declarations of the bound functions taken from their definitions, in a host unit of its own (or
    with `cpp_sources` when those hold no device code). Raises SplitUnavailable when the split
    cannot be set up, ValueError for an unreadable `load` source."""
    if scheme not in ("full", "split") or (scheme == "split" and platform != "cuda"):
        raise ValueError(f"no build scheme {scheme!r} for platform {platform!r}")
    split = scheme == "split"
    if capture.get("api") == "load":
        return _load_units(capture, platform, split)
    units = _inline_units(capture, platform, split)
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


# ------------------------------------------------------------------------------------ precompiled header
@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`: concurrent builders (threads or processes) wait for the one that
    builds the precompiled header instead of building it too."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pch_key(tc: BuildToolchain, flags: list[str]) -> str:
    blob = json.dumps([BUILD_VERSION, host_compiler(), flags, HOST_PRELUDE, _torch_paths()["version"],
                       compat_headers_hash(), tc.version])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def host_pch(tc: BuildToolchain, extra_flags: Iterable[str] = (), *, cache_dir: Path | None = None,
             timeout: float = 600.0) -> Path | None:
    """The header to force-include in host units (HOST_PRELUDE) with its GCC precompiled form next to it,
    built once per (host compiler, flags, torch version, compat headers, CUDA) under
    `<cache>/pch/<key>/` (~0.8 GB; building it takes ~35 s, a binding unit with it ~12 s instead of
    ~23 s, 2-core machine). None when it cannot be built: units then parse the headers (slower,
    same result). A failure is remembered (`failed.txt`) so it is not retried by every build."""
    flags = [*tc.host_flags(), *extra_flags]
    key = _pch_key(tc, flags)
    parent = (cache_dir or build_cache_dir()) / "pch"
    final = parent / key

    def ready() -> Path | None:
        return final / PCH_HEADER if (final / (PCH_HEADER + ".gch")).is_file() else None

    if ready() or (final / "failed.txt").is_file():
        return ready()
    parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(parent / f"{key}.lock"):
        if ready() or (final / "failed.txt").is_file():
            return ready()
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=parent))
        try:
            (tmp / PCH_HEADER).write_text(HOST_PRELUDE)
            r = run_process([host_compiler()[0], "-x", "c++-header", str(tmp / PCH_HEADER), "-o",
                             str(tmp / (PCH_HEADER + ".gch")), *flags], timeout=timeout, cwd=str(tmp))
            if r.timed_out:
                return None  # maybe the machine's fault: not remembered
            if r.returncode != 0:
                (tmp / f"{PCH_HEADER}.gch").unlink(missing_ok=True)
                (tmp / "failed.txt").write_text(r.stderr or r.stdout)
            with contextlib.suppress(OSError):  # a concurrent builder's rename (another host) may win
                os.rename(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return ready()


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


def unresolved_bindings(binding_obj: Path, other_objs: list[Path], names: Iterable[str]) -> list[str]:
    """Bound functions the binding object refers to that no other object defines (exported).

    `c++ -shared` accepts undefined symbols, so a bound function that the device units do not export
    (an `inline`/`static` definition, another overload) would only fail when the sandbox imports the
    module; found here instead, so the build falls back to the full scheme."""
    names = list(names)
    wanted = {s for s in _nm_symbols(binding_obj, "--undefined-only")
              if any(s == n or s.startswith(n + "(") for n in names)}
    defined: set[str] = set()
    for o in other_objs:
        defined |= _nm_symbols(o, "--defined-only", "--extern-only")
    return sorted(wanted - defined)


def _compile_one(u: Unit, tc: BuildToolchain, workdir: Path, module: str, extra: list[str], timeout: float,
                 cache_dir: Path | None) -> ProcessResult:
    src, obj = str(workdir / u.name), str(workdir / (u.name + ".o"))
    if u.kind == "device":
        return run_process(tc.compile_cmd(src, obj, module, tc.translate_flags(u.flags) + extra),
                           timeout=timeout, cwd=str(workdir))
    flags = tc.translate_flags(u.flags, host=True) + extra
    pch = host_pch(tc, extra, cache_dir=cache_dir, timeout=timeout)
    r = run_process(tc.host_compile_cmd(src, obj, module, flags, pch), timeout=timeout, cwd=str(workdir))
    if pch and r.returncode != 0 and "internal compiler error" in r.stderr:
        # GCC 12 crashed (rarely, not reproducibly) on a fresh PCH here: once more without it
        r = run_process(tc.host_compile_cmd(src, obj, module, flags), timeout=timeout, cwd=str(workdir))
    return r


def compile_units(units: list[Unit], tc: BuildToolchain, workdir: Path, module: str, *, timeout: float,
                  jobs: int = 2, extra: list[str] | None = None,
                  cache_dir: Path | None = None) -> tuple[list[tuple[str, str | None]], bool]:
    """Write and compile every unit in `workdir` (objects `<unit>.o`), `jobs` at a time:
    ([(unit name, error or None)], any timed out). A unit that only declares bound functions
    (`binds`) is then checked against the other objects (unresolved_bindings), as `[bindings]`."""
    for u in units:
        (workdir / u.name).write_text(u.text)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(jobs, len(units)))) as pool:
        results = list(pool.map(lambda u: (u, _compile_one(u, tc, workdir, module, extra or [], timeout,
                                                           cache_dir)), units))
    out: list[tuple[str, str | None]] = [
        (u.name, None if r.returncode == 0 else
         f"compiler timed out after {timeout:.0f} s" if r.timed_out else _trim(r.stderr or r.stdout))
        for u, r in results]
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
    scheme: str = "full"      # "split" | "full" (see the module docstring)
    fallback_reason: str | None = None  # why the split scheme was not used, when it was tried

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _trim(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + "\n... (truncated)"


def build_key(units: list[Unit], tc: BuildToolchain) -> str:
    blob = json.dumps([BUILD_VERSION, [(u.name, u.kind, u.text, u.flags) for u in units], tc.identity,
                       compat_headers_hash() if tc.platform == "cuda" else "",
                       host_compiler() if tc.platform == "cuda" else "", _torch_paths()["version"]])
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
                 timeout: float, jobs: int, t0: float) -> BuildResult:
    """Compile, link and cache one scheme's units (no cache lookup)."""
    key = build_key(units, tc)
    module = module_name_for(units, key)
    _entry(cache, key).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=_entry(cache, key).parent))
    try:
        out, timed_out = compile_units(units, tc, tmp, module, timeout=timeout, jobs=jobs, cache_dir=cache)
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


def _split_or_reason(capture: dict[str, Any], tc: BuildToolchain) -> tuple[list[Unit] | None, str | None]:
    if tc.platform != "cuda":
        return None, None
    try:
        return extension_units(capture, tc.platform, "split"), None
    except SplitUnavailable as exc:
        return None, str(exc)


def build_capture(capture: dict[str, Any], tc: BuildToolchain, *, cache_dir: Path | None = None,
                  timeout: float = 600.0, jobs: int = 2) -> BuildResult:
    """Build one captured call; never raises for a bad source (the error is in the result).

    cuda: the split scheme first; if it cannot be set up or fails to compile or link, the full scheme,
    whose result (and error) is the answer. A failed split is cached like any result, so a repeat
    goes straight to the full scheme's entry. rocm: the full scheme only."""
    t0 = time.monotonic()
    name = str(capture.get("name", "ext"))
    cache = cache_dir or build_cache_dir()
    try:
        full = extension_units(capture, tc.platform)
        split, reason = _split_or_reason(capture, tc)
    except ValueError as exc:
        return BuildResult(name, False, None, None, str(exc), 0.0, False, tc.identity, "")
    kw: dict[str, Any] = {"timeout": timeout, "jobs": jobs, "t0": t0}
    if split is not None:
        res = _cached(cache, build_key(split, tc), name, t0) or _build_units(split, "split", tc, name, cache, **kw)
        if res.ok or res.timed_out:
            return res
        reason = _trim(f"split build failed: {res.error}", MAX_FALLBACK_REASON_CHARS)
    res = _cached(cache, build_key(full, tc), name, t0) or _build_units(full, "full", tc, name, cache, **kw)
    res.fallback_reason = reason
    return res


def build_captures(captures: list[dict[str, Any]], tc: BuildToolchain, **kw: Any) -> list[BuildResult]:
    """Build every captured call (in order: the worker hands them out in the same order)."""
    return [build_capture(c, tc, **kw) for c in captures]


def compile_only(capture: dict[str, Any], tc: BuildToolchain, *, timeout: float = 600.0,
                 extra_includes: tuple[str, ...] = (), scheme: str = "auto",
                 jobs: int = 2) -> list[tuple[str, str | None]]:
    """Compile (no link) every unit of one captured call: [(unit name, error or None)].

    For machines without a GPU runtime to link against (CI): checks that the compat layer and
    the candidate's sources go through nvcc for the target arch. `scheme`: "split", "full", or
    "auto" (as build_capture: split on cuda, the full scheme when the split cannot be set up or
    fails); the unit names tell which (`binding.cpp`/`main.cpp` exist only in the split)."""
    schemes = (["split", "full"] if tc.platform == "cuda" else ["full"]) if scheme == "auto" else [scheme]
    extra = [f"-I{os.path.abspath(d)}" for d in extra_includes]  # units compile in a temp dir
    out: list[tuple[str, str | None]] = []
    for s in schemes:
        try:
            units = extension_units(capture, tc.platform, s)
        except SplitUnavailable as exc:
            out = [("[split]", str(exc))]
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
            cmd = [tc.compiler, "-x", "cu", "-c", src, "-o", src + ".o", "-O3", _torch_paths()["cxx_std"],
                   f"-gencode=arch=compute_{code},code=sm_{code}", "--expt-relaxed-constexpr", f"-I{COMPAT_INCLUDE}",
                   *tc.translate_flags(u.flags)]
            r = run_process(cmd, timeout=timeout, cwd=tmp)
            out.append((u.name, None if r.returncode == 0 else ("timed out" if r.timed_out else _trim(r.stderr or r.stdout))))
    return out
