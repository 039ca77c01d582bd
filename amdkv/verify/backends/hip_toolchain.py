"""Find the compiler that turns HIP sources into a torch extension, and spell its command lines.

Two toolchains (trusted side):
- `cuda`: nvcc + amdkv's HIP-on-CUDA compatibility headers (`hip_compat/include`), for NVIDIA GPUs;
- `rocm`: a real hipcc for the local AMD GPU (`--offload-arch` = torch's `gcnArchName`).

Why our own nvcc/hipcc commands rather than `torch.utils.cpp_extension.load_inline`: that function
compiles KernelBench's HIP style (`__global__` code in `cpp_sources`, `CXX=hipcc`) with the host C++
compiler on a CUDA build of torch, which fails; and it imports the module into the calling process,
which must not be the trusted parent. Why a module of its own: the compiler identities and paths found
here are ingredients of every cache key (hip_pch, hip_build) as well as of every command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from amdkv.env import tree_hash
from amdkv.errors import InfrastructureError

COMPAT_INCLUDE = Path(__file__).resolve().parent / "hip_compat" / "include"


def build_cache_dir() -> Path:
    """`<cache_dir>/hipbuild` of the environment's VerifierConfig (default ~/.cache/amdkv/hipbuild);
    callers holding a config pass `config.cache_path / "hipbuild"` instead."""
    from amdkv.config import VerifierConfig

    return VerifierConfig.from_env().cache_path / "hipbuild"


@functools.lru_cache(maxsize=1)
def compat_headers_hash() -> str:
    """Hash of the compatibility headers: a change to them invalidates cached builds."""
    return tree_hash(COMPAT_INCLUDE)[:16]


@functools.lru_cache(maxsize=1)
def torch_paths() -> dict[str, Any]:
    """Include and library paths, version, C++ standard and ABI of the installed torch: every command
    line and cache key needs them (cached: importing torch is slow)."""
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
        tp = torch_paths()
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
        tp = torch_paths()
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
        tp = torch_paths()
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
    tp = torch_paths()
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
