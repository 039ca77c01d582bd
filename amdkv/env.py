"""What a verdict needs to be reproduced: machine, GPU, toolchain and library versions.

`amdkv env` prints the same. Imports only stdlib + torch + triton (usable in every worker).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import amdkv


@functools.lru_cache(maxsize=1)
def git_hash() -> str | None:
    root = Path(amdkv.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """SHA-256 (hex) over every file of the installed amdkv package, path and bytes, in a fixed order
    (`__pycache__` left out; ~430 files, ~11 ms on the 2-core dev machine).

    Why, beside `git_hash`: the commit says nothing about uncommitted edits, a copy without `.git` (a
    wheel, the GPU machine's background run) has none, and a stale `.git` names the wrong code (session
    26: the device copy's reports said `7daabc8` for a tree at `e4239b3`). The verdict cache keys on it
    (verdict_cache.verifier_identity), so an edited verifier never gets an old verdict back."""
    return tree_hash(Path(amdkv.__file__).resolve().parent)


def describe_library(env: dict[str, Any]) -> str:
    """"VERSION (git COMMIT, source HASH)" of amdkv from a collected env, for every report's header (the
    source hash is left out of reports made before session 26, which have none)."""
    source = f", source {env['amdkv_source']}" if env.get("amdkv_source") else ""
    return f"{env.get('amdkv')} (git {env.get('amdkv_git')}{source})"


def tree_hash(root: Path) -> str:
    """SHA-256 (hex) over the files under `root`, each path (relative, POSIX) and its bytes, sorted by
    path; `__pycache__` folders left out (bytecode is made from the sources hashed here). The library's
    source (`source_hash`) and the HIP compatibility headers (hip_toolchain.compat_headers_hash) alike."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _tool_version(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else None


def gpu_info(device_index: int = 0) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"gpu": None}
    props = torch.cuda.get_device_properties(device_index)
    info: dict[str, Any] = {
        "gpu": props.name,
        "gpu_count": torch.cuda.device_count(),
        "gpu_memory_gib": round(props.total_memory / 2**30, 1),
        "multiprocessors": props.multi_processor_count,
    }
    if getattr(torch.version, "hip", None):
        info["arch"] = getattr(props, "gcnArchName", None)
        info["rocm"] = torch.version.hip
    else:
        info["arch"] = f"sm_{props.major}{props.minor}"
        info["cuda"] = torch.version.cuda
        drv = _tool_version(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        info["driver"] = drv
    return info


@functools.lru_cache(maxsize=4)
def collect_env(with_gpu: bool = True, with_tools: bool = False) -> dict[str, Any]:
    """Versions and machine facts. `with_tools` adds slow probes (nvcc, hipcc)."""
    import torch
    import triton

    env: dict[str, Any] = {
        "amdkv": amdkv.__version__,
        "amdkv_git": git_hash(),
        "amdkv_source": source_hash()[:12],
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
    }
    if with_gpu:
        env.update(gpu_info())
    if with_tools:
        env["nvcc"] = _tool_version(["nvcc", "--version"])
        env["hipcc"] = _tool_version(["hipcc", "--version"])
    return env
