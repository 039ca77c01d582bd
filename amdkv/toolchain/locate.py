"""Find a real hipcc and the AMD architectures it can compile for.

Order of preference: a ROCm install (`ROCM_PATH`, /opt/rocm, or hipcc on PATH), then the
project's Debian sid chroot (hipcc 7.x: gfx90a/gfx942/gfx950), then Debian bookworm's apt hipcc
(ROCm 5.2, clang 15: gfx90a/gfx940 only; it rejects gfx942 and gfx950 — measured, TOOLCHAINS.md).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from amdkv.toolchain.errors import ToolchainNotInstalled

MANIFEST_NAME = "amdkv-toolchain.json"
INSTALL_HINT = "run `make toolchain-hip` (or `amdkv toolchain install hip`) as root to set up the Debian sid hipcc"


def toolchain_dir() -> Path:
    """Root of the sid chroot: `AMDKV_TOOLCHAIN_DIR`, default ~/.cache/amdkv/toolchains/hip-sid."""
    from amdkv.config import ToolchainConfig

    env = ToolchainConfig.from_env().toolchain_dir
    return Path(env).expanduser() if env else Path.home() / ".cache" / "amdkv" / "toolchains" / "hip-sid"


@dataclasses.dataclass(frozen=True)
class HipToolchain:
    """One hipcc. For the chroot, `hipcc` is the path inside `root`."""

    kind: str                  # "rocm" | "sid-chroot" | "system"
    hipcc: str
    version: str               # e.g. "HIP 6.4.43484; clang 21.1.8"
    archs: tuple[str, ...]
    root: Path | None = None

    @property
    def identity(self) -> str:
        """What a compile result depends on besides source, arch and flags (for cache keys)."""
        return f"{self.kind}|{self.hipcc}|{self.version}"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["root"] = str(self.root) if self.root else None
        return d


def archs_for_clang(clang_major: int | None) -> tuple[str, ...]:
    """AMD CDNA targets a clang release accepts (gfx942 since LLVM 17, gfx950 since LLVM 20)."""
    if clang_major is None:
        return ()
    archs = ["gfx90a"]
    archs.append("gfx942" if clang_major >= 17 else "gfx940")
    if clang_major >= 20:
        archs.append("gfx950")
    return tuple(archs)


def parse_version(text: str) -> tuple[str, int | None]:
    """(`"HIP x; clang y"`, clang major) from `hipcc --version` output."""
    hip = re.search(r"HIP version:\s*([\w.\-]+)", text)
    clang = re.search(r"clang version\s*(\d+)(\.[\d.]+)?", text)
    version = f"HIP {hip.group(1) if hip else '?'}; clang {clang.group(1) + (clang.group(2) or '') if clang else '?'}"
    return version, int(clang.group(1)) if clang else None


def _host_hipcc(path: str, kind: str) -> HipToolchain | None:
    env = dict(os.environ, HIP_PLATFORM="amd")
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    version, major = parse_version(out.stdout + out.stderr)
    archs = archs_for_clang(major)
    return HipToolchain(kind, path, version, archs) if archs else None


def read_manifest(root: Path | None = None) -> dict | None:
    path = (root or toolchain_dir()) / MANIFEST_NAME
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _sid_chroot() -> HipToolchain | None:
    root = toolchain_dir()
    manifest = read_manifest(root)
    if manifest is None or not (root / "usr/bin/hipcc").exists():
        return None
    if os.geteuid() != 0:  # chroot and mount namespaces need root
        return None
    return HipToolchain("sid-chroot", "/usr/bin/hipcc", manifest.get("hipcc_version", "?"),
                        tuple(manifest.get("archs", ())), root)


@functools.lru_cache(maxsize=None)
def _cached_toolchains(rocm_path: str | None, path_env: str | None, tdir: str) -> tuple[HipToolchain, ...]:
    found: list[HipToolchain] = []
    seen: set[str] = set()
    candidates = []
    if rocm_path:
        candidates.append((os.path.join(rocm_path, "bin", "hipcc"), "rocm"))
    candidates.append(("/opt/rocm/bin/hipcc", "rocm"))
    on_path = shutil.which("hipcc", path=path_env)
    if on_path:
        candidates.append((on_path, "rocm" if "rocm" in on_path else "system"))
    for path, kind in candidates:
        real = os.path.realpath(path)
        if real in seen or not os.access(path, os.X_OK):
            continue
        seen.add(real)
        tc = _host_hipcc(path, kind)
        if tc:
            found.append(tc)
    sid = _sid_chroot()
    if sid:
        found.insert(len([t for t in found if t.kind == "rocm"]), sid)
    return tuple(found)


def find_toolchains() -> list[HipToolchain]:
    """Every usable hipcc, best first (ROCm, sid chroot, system)."""
    return list(_cached_toolchains(os.environ.get("ROCM_PATH"), os.environ.get("PATH"), str(toolchain_dir())))


def refresh() -> None:
    """Forget what was found (after an install)."""
    _cached_toolchains.cache_clear()


def find_toolchain(arch: str = "gfx942") -> HipToolchain:
    """The best hipcc that compiles for `arch`; raises `ToolchainNotInstalled` with the fix."""
    all_tc = find_toolchains()
    for tc in all_tc:
        if arch.split(":")[0] in tc.archs:
            return tc
    have = "; ".join(f"{t.kind} {t.hipcc} ({t.version}: {', '.join(t.archs)})" for t in all_tc) or "none"
    raise ToolchainNotInstalled(f"no hipcc that compiles for {arch} (found: {have})", hint=INSTALL_HINT)
