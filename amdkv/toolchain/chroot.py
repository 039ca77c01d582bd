"""Run a command inside the sid chroot, with its mounts in a private mount namespace.

Why a private namespace (`unshare --mount --propagation private`): the compiler needs /proc
(and, for torch-extension sources, the host's torch headers bind-mounted read-only) inside the
chroot. Mounting them in the host namespace would leave mounts behind when a compile is killed
on timeout and would make concurrent compiles race on mount/unmount. In a private namespace the
mounts exist only for the lifetime of that one process tree: the kernel drops them when the last
process exits, however it exits, and parallel compiles each see their own.
Work files are placed in a per-compile directory under ROOT/tmp (visible in the chroot without any
bind mount) and removed by the caller.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Mapping, Sequence

from amdkv.toolchain.errors import ToolchainError
from amdkv.process import ProcessResult, run_process

CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def chroot_argv(root: Path, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                binds: Mapping[str, str] | None = None, cwd: str = "/") -> list[str]:
    """Host argv that runs `argv` in `root` with /proc mounted and `binds` (host -> in-root, read-only).

    The in-root bind targets are created (on the host side) if missing; they stay as empty dirs.
    """
    for unshare in ("unshare", "chroot"):
        if shutil.which(unshare) is None:
            raise ToolchainError(f"`{unshare}` not found on PATH",
                                 hint="install util-linux and coreutils (apt-get install util-linux coreutils)")
    r = shlex.quote(str(root))
    script = [f"mount -t proc proc {r}/proc"]
    for host, inside in (binds or {}).items():
        target = root / inside.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        t = shlex.quote(str(target))
        script.append(f"mount --bind {shlex.quote(host)} {t} && mount -o remount,bind,ro {t}")
    full_env = {"PATH": CHROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    full_env.update(env or {})
    env_args = " ".join(shlex.quote(f"{k}={v}") for k, v in full_env.items())
    inner = " ".join(shlex.quote(a) for a in argv)
    script.append(f"exec chroot {r} /usr/bin/env -i {env_args} sh -c "
                  + shlex.quote(f"cd {shlex.quote(cwd)} && exec {inner}"))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(script)]


def run_in_chroot(root: Path, argv: Sequence[str], *, timeout: float,
                  env: Mapping[str, str] | None = None, binds: Mapping[str, str] | None = None,
                  cwd: str = "/") -> ProcessResult:
    """Run `argv` in the chroot through `amdkv.process.run_process` (own process group, timeout)."""
    return run_process(chroot_argv(root, argv, env=env, binds=binds, cwd=cwd), timeout=timeout)
