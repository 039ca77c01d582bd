"""Install hipcc 7.x for gfx90a/gfx942/gfx950 in a Debian sid chroot (idempotent).

Recipe measured in TOOLCHAINS.md: `debootstrap --variant=minbase sid` from the mirror the machine's
apt already uses, then apt-get inside the chroot (`Check-Valid-Until=false`: the mirror's sid
Release file may be expired). sid moves, so every step fails loudly with what to try, the package
list can be overridden (`AMDKV_HIP_PACKAGES`, `AMDKV_HIP_TORCH_PACKAGES`), and the versions that
were installed are pinned in the manifest (`<root>/amdkv-toolchain.json`).
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from amdkv.toolchain import locate
from amdkv.toolchain.chroot import run_in_chroot
from amdkv.toolchain.errors import ToolchainError
from amdkv.toolchain.mirror import debian_mirror
from amdkv.process import run_process

BASE_PACKAGES = ("hipcc", "libamdhip64-dev", "rocm-device-libs-21")
TORCH_PACKAGES = ("librocthrust-dev", "libpython3-dev")
APT_OPTS = ("-o", "Acquire::Check-Valid-Until=false", "-o", "Acquire::Retries=3")
DEBOOTSTRAP_DONE = ".amdkv-debootstrap-done"
VERIFY_SOURCE = r"""
#include <hip/hip_runtime.h>
__global__ void amdkv_probe(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}
"""

Log = Callable[[str], None]


def _default_log(msg: str) -> None:
    print(f"[amdkv toolchain] {msg}", file=sys.stderr, flush=True)


def _tail(text: str, n: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


def _packages(setting: str, default: tuple[str, ...]) -> list[str]:
    """A package list from ToolchainConfig (AMDKV_HIP_PACKAGES / AMDKV_HIP_TORCH_PACKAGES), else the default."""
    from amdkv.config import ToolchainConfig

    chosen = getattr(ToolchainConfig.from_env(), setting)
    return list(chosen) if chosen else list(default)


def _mounts_under(root: Path) -> list[str]:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    r = str(root.resolve())
    return [ln.split()[1] for ln in lines if len(ln.split()) > 1 and ln.split()[1].startswith(r + "/")]


def _ensure_debootstrap(log: Log) -> None:
    if shutil.which("debootstrap"):
        return
    if not shutil.which("apt-get"):
        raise ToolchainError("debootstrap is missing and there is no apt-get to install it",
                             hint="install debootstrap with your package manager, then retry")
    log("installing debootstrap with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    res = run_process(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"], timeout=600, env=env)
    if res.returncode != 0:
        run_process(["apt-get", "update", "-qq"], timeout=600, env=env)
        res = run_process(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"],
                          timeout=600, env=env)
    if res.returncode != 0:
        raise ToolchainError(f"apt-get install debootstrap failed:\n{_tail(res.stderr)}",
                             hint="run `apt-get update && apt-get install debootstrap` by hand and retry")


def _debootstrap(root: Path, mirror: str, log: Log) -> None:
    if (root / DEBOOTSTRAP_DONE).exists():
        log(f"base system already in {root}")
        return
    if root.exists() and any(root.iterdir()):
        mounts = _mounts_under(root)
        if mounts:
            raise ToolchainError(f"{root} has mounts under it ({', '.join(mounts)}); refusing to delete it",
                                 hint=f"unmount them (umount {' '.join(mounts)}) and retry")
        log(f"removing an unfinished chroot at {root}")
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    log(f"debootstrap --variant=minbase sid from {mirror} (about 30 s)")
    t = time.monotonic()
    res = run_process(["debootstrap", "--variant=minbase", "--include=ca-certificates", "sid", str(root), mirror],
                      timeout=1800)
    if res.returncode != 0:
        raise ToolchainError(
            f"debootstrap of Debian sid from {mirror} failed (rc {res.returncode}):\n{_tail(res.stdout + res.stderr)}",
            hint="check that the mirror serves sid (set AMDKV_DEBIAN_MIRROR to another Debian mirror) and that "
                 f"debootstrap is recent enough to know sid; then delete {root} and retry")
    (root / DEBOOTSTRAP_DONE).write_text(datetime.datetime.now(datetime.timezone.utc).isoformat())
    log(f"base system ready ({time.monotonic() - t:.0f} s)")


def _apt_install(root: Path, packages: list[str], log: Log) -> None:
    log("apt-get update in the chroot")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    res = run_in_chroot(root, ["apt-get", *APT_OPTS, "update", "-qq"], timeout=900, env=env)
    if res.returncode != 0:
        raise ToolchainError(f"apt-get update in the sid chroot failed:\n{_tail(res.stdout + res.stderr)}",
                             hint="check network access to the mirror in "
                                  f"{root}/etc/apt/sources.list; set AMDKV_DEBIAN_MIRROR and delete {root} to rebuild")
    log(f"apt-get install {' '.join(packages)}")
    t = time.monotonic()
    res = run_in_chroot(root, ["apt-get", *APT_OPTS, "install", "-y", "-qq", "--no-install-recommends", *packages],
                        timeout=1800, env=env)
    if res.returncode != 0:
        raise ToolchainError(
            f"apt-get install {' '.join(packages)} in the sid chroot failed:\n{_tail(res.stdout + res.stderr)}",
            hint="Debian sid moves: a package may have been renamed (e.g. rocm-device-libs-21 -> -22). Look with "
                 f"`chroot {root} apt-cache search rocm-device-libs` and set AMDKV_HIP_PACKAGES "
                 "(and AMDKV_HIP_TORCH_PACKAGES) to the current names, then retry")
    log(f"packages installed ({time.monotonic() - t:.0f} s)")


def _installed_versions(root: Path) -> dict[str, str]:
    res = run_in_chroot(root, ["dpkg-query", "-W", "-f=${Package}\t${Version}\n"], timeout=120)
    out = {}
    for line in res.stdout.splitlines():
        name, _, version = line.partition("\t")
        if name:
            out[name] = version
    return out


def _hipcc_version(root: Path) -> str:
    res = run_in_chroot(root, ["hipcc", "--version"], timeout=120, env={"HIP_PLATFORM": "amd"})
    return locate.parse_version(res.stdout + res.stderr)[0] if res.returncode == 0 else "?"


def verify_toolchain(tc: locate.HipToolchain, archs: tuple[str, ...] = ("gfx942",)) -> dict[str, float]:
    """Compile a tiny kernel for each arch; raise ToolchainError if any fails. Returns seconds per arch."""
    from amdkv.toolchain.hipcc import HipCompiler

    comp = HipCompiler(tc, cache_dir=False, timeout=300)
    times = {}
    for arch in archs:
        res = comp.compile(VERIFY_SOURCE, arch)
        if not res.ok or not any(r.kernel.startswith("amdkv_probe") for r in res.resources):
            raise ToolchainError(f"the installed hipcc could not compile a tiny kernel for {arch}:\n{_tail(res.stderr)}",
                                 hint="delete the toolchain dir and rerun `amdkv toolchain install hip`; if it fails "
                                      "again the sid packages changed: see docs/amd_compile.md")
        times[arch] = round(res.seconds, 2)
    return times


def install_hip_toolchain(root: Path | None = None, *, torch_ext: bool = False, force: bool = False,
                          log: Log = _default_log) -> dict:
    """Set up (or check) the sid chroot with hipcc; returns the manifest. Needs root privileges."""
    root = Path(root) if root else locate.toolchain_dir()
    if os.geteuid() != 0:
        raise ToolchainError("installing the hipcc chroot needs root (debootstrap, chroot, mount namespaces)",
                             hint="run `sudo make toolchain-hip`, or install ROCm and set ROCM_PATH")
    t0 = time.monotonic()
    packages = _packages("hip_packages", BASE_PACKAGES)
    if torch_ext:
        packages += _packages("hip_torch_packages", TORCH_PACKAGES)
    manifest = locate.read_manifest(root)
    if manifest and not force and set(packages) <= set(manifest.get("requested", [])):
        log(f"hipcc toolchain already installed at {root} ({manifest.get('hipcc_version')}); verifying")
        tc = locate.HipToolchain("sid-chroot", "/usr/bin/hipcc", manifest.get("hipcc_version", "?"),
                                 tuple(manifest.get("archs", ())), root)
        verify_toolchain(tc)
        log(f"ok ({time.monotonic() - t0:.1f} s)")
        return manifest
    mirror = debian_mirror()
    _ensure_debootstrap(log)
    _debootstrap(root, mirror, log)
    _apt_install(root, packages, log)
    version = _hipcc_version(root)
    archs = locate.archs_for_clang(locate.parse_version(version.replace("clang", "clang version"))[1])
    tc = locate.HipToolchain("sid-chroot", "/usr/bin/hipcc", version, archs, root)
    log(f"verifying {version} with a compile for gfx942")
    verify_times = verify_toolchain(tc)
    versions = _installed_versions(root)
    manifest = {
        "kind": "sid-chroot",
        "root": str(root),
        "mirror": mirror,
        "installed_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "hipcc_version": version,
        "archs": list(archs),
        "requested": sorted(set(packages) | set((manifest or {}).get("requested", []))),
        "pinned": {p: versions.get(p) for p in packages},
        "all_packages": versions,
        "install_seconds": round(time.monotonic() - t0, 1),
        "verify_seconds": verify_times,
    }
    (root / locate.MANIFEST_NAME).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    locate.refresh()
    log(f"hipcc toolchain ready at {root}: {version}, archs {', '.join(archs)} ({manifest['install_seconds']} s)")
    return manifest
