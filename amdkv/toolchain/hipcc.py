"""Run a real hipcc for one AMD arch and read back per-kernel resources.

`HipCompiler.compile(source, arch)` is a device-only compile (`--cuda-device-only -c`): it checks the
whole translation unit (host code is parsed and checked too) and runs the AMDGPU backend, whose
`-Rpass-analysis=kernel-resource-usage` remarks give registers, spills, scratch, LDS and occupancy
per kernel. It does not link or build the host object (which would double the time and tell us
nothing about the GPU code). Results are cached by content (source, arch, flags, compiler).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterable, Sequence

from amdkv.archs import ArchResources
from amdkv.toolchain.chroot import run_in_chroot
from amdkv.toolchain.locate import HipToolchain, find_toolchain
from amdkv.process import run_process
from amdkv.toolchain.remarks import parse_resource_remarks

CACHE_VERSION = 1
BASE_FLAGS = ("-x", "hip", "--cuda-device-only", "-c", "-O3", "-Rpass-analysis=kernel-resource-usage")
IN_ROOT_TORCH = "/opt/amdkv/torch-include"
IN_ROOT_PCH = "/var/cache/amdkv-pch"
PCH_HEADER = "#include <torch/extension.h>\n#include <hip/hip_runtime.h>\n"
MAX_ERROR_CHARS = 6000


def hip_cache_dir() -> Path:
    """`AMDKV_HIP_CACHE_DIR`, default ~/.cache/amdkv/hipcache."""
    from amdkv.config import ToolchainConfig

    env = ToolchainConfig.from_env().hip_cache_dir
    return Path(env).expanduser() if env else Path.home() / ".cache" / "amdkv" / "hipcache"


@dataclasses.dataclass
class CompileResult:
    """Outcome of one translation unit compiled for one arch."""

    ok: bool
    arch: str
    stderr: str
    resources: list[ArchResources]
    seconds: float
    cached: bool = False
    timed_out: bool = False
    command: list[str] = dataclasses.field(default_factory=list)
    toolchain: str = ""

    @property
    def error(self) -> str | None:
        """The compiler's diagnostics without the resource remarks (None when it compiled)."""
        if self.ok:
            return None
        return compiler_message(self.stderr) or ("timed out" if self.timed_out else "hipcc failed")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CompileResult":
        d = dict(d)
        d["resources"] = [ArchResources(**r) for r in d.get("resources", [])]
        return cls(**d)


def compiler_message(stderr: str) -> str:
    """Compiler stderr minus the resource-usage remarks, trimmed to a readable size."""
    lines = [ln for ln in stderr.splitlines() if "kernel-resource-usage" not in ln]
    text = "\n".join(lines).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = text[:MAX_ERROR_CHARS] + "\n... (truncated)"
    return text


def torch_include_dirs() -> list[str]:
    """Host include dirs of the installed torch (for full torch-extension compiles)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return []
    inc = Path(list(spec.submodule_search_locations)[0]) / "include"
    return [str(inc), str(inc / "torch" / "csrc" / "api" / "include")] if inc.is_dir() else []


class HipCompiler:
    """A hipcc (ROCm on the host, or the sid chroot) with a content-addressed result cache."""

    def __init__(self, toolchain: HipToolchain | None = None, *, arch_hint: str = "gfx942",
                 cache_dir: Path | None | bool = None, timeout: float = 300.0, use_pch: bool = True) -> None:
        self.toolchain = toolchain or find_toolchain(arch_hint)
        self.timeout = timeout
        self.use_pch = use_pch
        if cache_dir is False:
            self.cache_dir: Path | None = None
        else:
            self.cache_dir = Path(cache_dir) if cache_dir else hip_cache_dir()

    # ---- cache -------------------------------------------------------------------------------
    def cache_key(self, source: str, arch: str, flags: Sequence[str], torch_headers: bool) -> str:
        blob = json.dumps([CACHE_VERSION, source, arch, list(BASE_FLAGS), list(flags), torch_headers,
                           self.toolchain.identity])
        return hashlib.sha256(blob.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    def _cache_get(self, key: str) -> CompileResult | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            res = CompileResult.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        res.cached = True
        return res

    def _cache_put(self, key: str, res: CompileResult) -> None:
        path = self._cache_path(key)
        if path is None or res.timed_out:  # a timeout may be the machine's fault: never cache it
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(res.to_dict()))
        os.replace(tmp, path)  # atomic: concurrent writers of the same key are harmless

    # ---- compile -----------------------------------------------------------------------------
    def compile(self, source: str, arch: str, extra_flags: Sequence[str] = (), *,
                torch_headers: bool = False, use_cache: bool = True) -> CompileResult:
        """Device-only compile of `source` for `arch`; never raises for a bad source."""
        arch_base = arch.split(":")[0]
        if arch_base not in self.toolchain.archs:
            msg = (f"{self.toolchain.kind} hipcc ({self.toolchain.version}) cannot compile for {arch}; "
                   f"it supports {', '.join(self.toolchain.archs)}")
            return CompileResult(False, arch, msg, [ArchResources(arch, "<all>", False, error=msg)], 0.0,
                                 toolchain=self.toolchain.identity)
        flags = list(extra_flags)
        key = self.cache_key(source, arch, flags, torch_headers)
        if use_cache:
            hit = self._cache_get(key)
            if hit is not None:
                return hit
        res = self._compile_uncached(source, arch, flags, torch_headers)
        if use_cache:
            self._cache_put(key, res)
        return res

    def compile_many(self, jobs: Iterable[tuple[str, str, Sequence[str]]], *, torch_headers: bool = False,
                     max_workers: int | None = None) -> list[CompileResult]:
        """Compile (source, arch, flags) jobs in parallel across cores; results in job order."""
        jobs = list(jobs)
        workers = max_workers or max(1, min(len(jobs), os.cpu_count() or 1))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futs = [pool.submit(self.compile, src, arch, flags, torch_headers=torch_headers)
                    for src, arch, flags in jobs]
            return [f.result() for f in futs]

    def _argv(self, arch: str, flags: list[str], torch_headers: bool, py_include: str | None,
              pch: str | None = None, base: Sequence[str] = BASE_FLAGS,
              src: Sequence[str] = ("src.hip", "-o", "src.o")) -> list[str]:
        argv = [self.toolchain.hipcc, *base, f"--offload-arch={arch}"]
        if torch_headers:
            if self.toolchain.root is not None:
                argv += [f"-I{IN_ROOT_TORCH}", f"-I{IN_ROOT_TORCH}/torch/csrc/api/include"]
            else:
                argv += [f"-I{d}" for d in torch_include_dirs()]
            if py_include:
                argv.append(f"-I{py_include}")
            argv += ["-D__HIP_PLATFORM_AMD__=1", "-DUSE_ROCM=1", "-DTORCH_EXTENSION_NAME=amdkv_ext",
                     "-DTORCH_API_INCLUDE_EXTENSION_H", "-std=c++20"]  # torch 2.13's cpp_extension uses C++20
        if pch:
            argv += ["-Xclang", "-include-pch", "-Xclang", pch]
        return argv + flags + list(src)

    # ---- precompiled torch headers ---------------------------------------------------------
    def _pch_dir(self) -> Path:
        """Host path of the PCH cache (inside the chroot when there is one, so hipcc sees it)."""
        if self.toolchain.root is not None:
            return self.toolchain.root / IN_ROOT_PCH.lstrip("/")
        return hip_cache_dir() / "pch"

    def _pch_key(self, arch: str, flags: list[str]) -> str:
        import importlib.metadata

        try:
            torch_version = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = "?"
        dirs = torch_include_dirs()
        blob = json.dumps([CACHE_VERSION, arch, flags, self.toolchain.identity, torch_version, dirs])
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def ensure_pch(self, arch: str, flags: Sequence[str] = ()) -> str | None:
        """Path (as hipcc sees it) of torch/extension.h precompiled for `arch` + `flags`; built once.

        Why: parsing torch's headers is ~30 s of every torch-extension compile (measured); a PCH
        built once per (arch, flags, torch, compiler) turns that into a few seconds. Semantics: the
        header is included as if first in the file (sources include it first anyway; a source
        that defines macros before including torch could compile differently). Returns None
        when the PCH cannot be built; callers then compile without it.
        """
        import fcntl

        flags = list(flags)
        key = self._pch_key(arch, flags)
        pdir = self._pch_dir()
        pdir.mkdir(parents=True, exist_ok=True)
        pch = pdir / f"torch-{key}.pch"
        seen = (IN_ROOT_PCH + "/" + pch.name) if self.toolchain.root is not None else str(pch)
        if pch.is_file():
            return seen
        with open(pdir / f"torch-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one builder per key; the others wait and reuse it
            if pch.is_file():
                return seen
            # The PCH remembers its header's path (and checks it at use): keep the header beside it.
            header = pdir / f"torch-{key}.h"
            header.write_text(PCH_HEADER)
            header_seen = seen[:-len(".pch")] + ".h"
            # -S: with -c the HIP driver would try to link the "object" (the PCH) into a code object.
            res = self._run(PCH_HEADER, self._argv(arch, flags, True, self._python_include(),
                                                   base=("-x", "hip", "-S", "--cuda-device-only", "-O3"),
                                                   src=("-Xclang", "-emit-pch", header_seen, "-o", "out.pch")),
                            torch_headers=True, keep="out.pch")
            proc, built = res
            if proc.returncode != 0 or built is None:
                return None
            tmp = pch.with_suffix(f".{uuid.uuid4().hex}.tmp")
            shutil.move(str(built), tmp)
            os.replace(tmp, pch)
        return seen

    def _run(self, source: str, argv: list[str], *, torch_headers: bool, keep: str | None = None):
        """Write `source` to a fresh work dir as src.hip, run `argv` there; optionally keep one output."""
        root = self.toolchain.root
        if root is not None:
            work = root / "tmp" / f"amdkv-{uuid.uuid4().hex}"  # unique per compile: no collisions
            work.mkdir(parents=True)
        else:
            work = Path(tempfile.mkdtemp(prefix="amdkv-hip-"))
        kept = None
        try:
            (work / "src.hip").write_text(source)
            env = {"HIP_PLATFORM": "amd"}
            if root is not None:
                dirs = torch_include_dirs()
                binds = {dirs[0]: IN_ROOT_TORCH} if torch_headers and dirs else {}
                proc = run_in_chroot(root, argv, timeout=self.timeout, env=env, binds=binds,
                                     cwd="/" + str(work.relative_to(root)))
            else:
                proc = run_process(argv, timeout=self.timeout, env=dict(os.environ, **env), cwd=str(work))
            if keep and (work / keep).is_file():
                fd, name = tempfile.mkstemp(dir=work.parent, prefix=".amdkv-keep-")
                os.close(fd)
                shutil.move(str(work / keep), name)
                kept = Path(name)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return proc, kept

    def _python_include(self) -> str | None:
        if self.toolchain.root is not None:
            found = sorted((self.toolchain.root / "usr" / "include").glob("python3*/Python.h"))
            return "/" + str(found[-1].parent.relative_to(self.toolchain.root)) if found else None
        import sysconfig

        return sysconfig.get_paths().get("include")

    def _compile_uncached(self, source: str, arch: str, flags: list[str], torch_headers: bool) -> CompileResult:
        start = time.monotonic()
        pch = self.ensure_pch(arch, flags) if torch_headers and self.use_pch else None
        argv = self._argv(arch, flags, torch_headers, self._python_include() if torch_headers else None, pch)
        proc, _ = self._run(source, argv, torch_headers=torch_headers)
        seconds = time.monotonic() - start
        ok = proc.returncode == 0 and not proc.timed_out
        stderr = proc.stderr + ("" if not proc.timed_out else f"\nhipcc timed out after {self.timeout:.0f} s")
        if ok:
            resources = parse_resource_remarks(stderr, arch)
        else:
            resources = [ArchResources(arch, "<all>", False, error=compiler_message(stderr) or "hipcc failed")]
        return CompileResult(ok, arch, stderr, resources, seconds, timed_out=proc.timed_out,
                             command=argv, toolchain=self.toolchain.identity)
