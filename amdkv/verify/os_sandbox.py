"""The operating-system sandbox of the verifier's worker processes: what the kernel itself refuses.

The checks inside a worker (static AST rules, the audit hook of runtime_guards.py) see Python only.
C and C++ reached from a candidate (a HIP extension's host code, ctypes, a torch C++ API) calls the
kernel directly, so every worker also runs confined by the kernel, set up by `enter(plan)` in the
worker's own process while it is still single-threaded (a child just forked by the fork server, or
an exec'd worker before it imports torch):

  part                mechanism (why this one)                                    needs
  ------------------  ----------------------------------------------------------  ---------------
  user_namespace      unshare(CLONE_NEWUSER): the worker holds no capability of   unprivileged
                      the machine's; it makes the two parts below possible         user namespaces
                      without privileges. As root the real uid becomes `nobody`
                      (files are still accessed as root: the effective uid stays),
                      so that the process limit applies (root is exempt from it).
  network_namespace   unshare(CLONE_NEWNET): no interface but a loopback that is   user_namespace
                      down, so no packet leaves or arrives (TCP, UDP, DNS, ICMP)   or root
  landlock_fs         Landlock: read/execute only beneath the system and Python    Landlock ABI >= 1
                      folders and what the worker is handed, write only beneath    (no privileges)
                      its scratch folder, GPU device files only on GPU platforms.
                      A Landlock domain also refuses ptrace of outside processes,
                      which closes /proc/<pid>/{mem,environ,fd,maps} of the parent.
  landlock_tcp        Landlock: TCP bind/connect refused (a layer under the        ABI >= 4
                      network namespace)
  landlock_scope      Landlock: no signal to, and no abstract UNIX socket of, a    ABI >= 6
                      process outside the sandbox (the harness, other workers)
  seccomp             a BPF filter (TSYNC): no socket() at all (socketpair is      seccomp filter
                      fine), no setsid/setpgid (every child stays in the group     (no privileges)
                      the parent kills), no set*id, ptrace, mount, namespaces,
                      keyrings, bpf, perf events, io_uring, modules, clock
                      changes, file handles; 32-bit syscalls refused
  process_limit       RLIMIT_NPROC inside the worker's own user namespace, so it   user_namespace
                      counts this worker's processes and threads only
  resource_limits     RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_CORE=0, oom_score_adj 1000   nothing
                      (the OOM killer takes a worker, not the harness). Host
                      memory (RLIMIT_DATA) is not the sandbox's: every child gets
                      it at its start, sandbox or not (process.cap_host_memory)

Why not bubblewrap: it confines a process it execs, so every worker would be exec'd and lose the
fork server's warm state (2.4x throughput on the CPU interpreter, half the host CPU on an H200,
docs/verifier.md); everything it would do for us is a few syscalls the forked child makes itself.
Why not a mount namespace: Landlock expresses "read-only except the scratch folder" without
privileges, for root too, and costs no mount table per worker. Why no PID namespace: the worker
would be PID 1 (signal semantics change) or need an extra init process, /proc must be remounted
(refused in many containers), and the parts above already stop signals, ptrace and escapes from
the process group.

`enter(plan)` applies what the machine allows and says what was missing (`plan.mode == "require"`
raises instead). `capabilities()` probes a fresh child process once per process. Standard library
only (ctypes): `os.unshare` exists only from Python 3.12, and no seccomp/Landlock package is needed.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import json
import os
import platform as _platform
import resource
import struct
import subprocess
import sys
import tempfile
from typing import Any, Iterable, Sequence

from amdkv.config import SANDBOX_MODES

USER_NAMESPACE = "user_namespace"
NETWORK_NAMESPACE = "network_namespace"
LANDLOCK_FS = "landlock_fs"
LANDLOCK_TCP = "landlock_tcp"
LANDLOCK_SCOPE = "landlock_scope"
SECCOMP = "seccomp"
PROCESS_LIMIT = "process_limit"
RESOURCE_LIMITS = "resource_limits"
PARTS = (USER_NAMESPACE, NETWORK_NAMESPACE, LANDLOCK_FS, LANDLOCK_TCP, LANDLOCK_SCOPE, SECCOMP, PROCESS_LIMIT,
         RESOURCE_LIMITS)
MODES = SANDBOX_MODES  # auto: what the machine allows; require: all or refuse; off: none
NOBODY_UID = 65534  # the real uid of a root-started worker (see USER_NAMESPACE above)

# Character devices every worker may read and write (Python, subprocess and libraries open these).
BASIC_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
# GPU device files (NVIDIA, AMD): granted to workers of GPU platforms only.
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/kfd", "/dev/dri")
# Folders of the system every worker may read and execute from (the Python installation, the amdkv
# package and site-packages are added by python_roots()). /proc and /sys are read-only; a Landlock
# domain cannot ptrace outside processes, so /proc/<pid>/{mem,environ,fd,maps} of others stay closed.
SYSTEM_ROOTS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys")


class SandboxError(OSError):
    """A part of the sandbox could not be set up and the plan requires it."""


@dataclasses.dataclass(frozen=True)
class SandboxPlan:
    """What one worker process is confined to. JSON-able: it travels to a forked child in its spawn
    request and to an exec'd one on its command line."""

    mode: str = "auto"                       # auto: apply what the machine allows; require: all or fail
    readable: tuple[str, ...] = ()           # read + execute beneath these files/folders
    writable: tuple[str, ...] = ()           # everything beneath (the scratch folder)
    devices: tuple[str, ...] = ()            # device files/folders: read, write, ioctl
    nproc: int | None = None                 # processes + threads of the worker (RLIMIT_NPROC)
    file_size_bytes: int | None = None       # RLIMIT_FSIZE
    cpu_seconds: int | None = None           # RLIMIT_CPU (SIGXCPU at the soft limit)
    gpu_runtime: bool = False                # what a GPU runtime needs to start (see "What NVIDIA's CUDA runtime needs")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> "SandboxPlan":
        data = json.loads(text) if isinstance(text, str) else dict(text)
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


# ------------------------------------------------------------------------------ what to allow
def _existing(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if p and os.path.exists(p) and p not in out:
            out.append(p)
    return out


@functools.lru_cache(maxsize=1)
def python_roots() -> tuple[str, ...]:
    """The Python installation, its site-packages and the amdkv package: what a worker imports from
    (also the read allow-list of the in-process audit hook, runtime_guards.FileAccessGuard)."""
    import sysconfig

    roots = [sys.prefix, sys.base_prefix, sys.exec_prefix]
    paths = sysconfig.get_paths()
    roots += [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib", "include", "platinclude") if k in paths]
    roots += [p for p in sys.path if _import_root(p)]
    import amdkv  # the harness's own modules load lazily (the launch capture, the HIP loader)

    roots.append(os.path.dirname(os.path.abspath(amdkv.__file__)))
    return tuple(_existing(os.path.realpath(r) for r in roots))


def _import_root(path: str) -> bool:
    """A folder on sys.path a worker may read: site-packages, PYTHONPATH entries and folders added by
    .pth files (editable installs). A worker imports from all of them, as its parent did (found on
    the H200: wheels installed with `pip --target /tmp/site` and put on PYTHONPATH could not be
    imported by sandboxed workers, and every verification was infra_error). Not the working
    directory or the home folder themselves: the parent's `''`/cwd entry would open the user's
    project to every candidate, and amdkv's own package folder is added apart."""
    if not path or not os.path.isdir(path):
        return False
    real = os.path.realpath(path)
    return real not in (os.path.realpath(os.getcwd()), os.path.realpath(os.path.expanduser("~")), "/")


def system_roots() -> tuple[str, ...]:
    return tuple(_existing(SYSTEM_ROOTS)) + python_roots()


def gpu_devices() -> tuple[str, ...]:
    import glob

    return tuple(_existing(p for pattern in GPU_DEVICE_GLOBS for p in sorted(glob.glob(pattern))))


# What NVIDIA's CUDA runtime needs to start, found on the H200 (session 7) with
# benchmarks/sandbox_gpu_probe.py: cudaGetDeviceCount() failed with "Error 304: OS call failed"
# (1) when seccomp refused socket(), fixed by allowing AF_UNIX sockets only (the driver opens a
# local socket at start-up, e.g. to look for an MPS server), and (2) under Landlock unless the
# worker may write files beneath its own /proc/<pid> (thread names, its own process attributes).
# Neither reaches beyond the worker: TCP/UDP/raw and netlink sockets stay refused, abstract UNIX
# sockets are confined by the network namespace and Landlock's scope, and /proc/<pid> of other
# processes stays read-only. A path-based UNIX socket on the machine (a daemon's control socket)
# is reachable where the worker's uid may write it: that is the price of a GPU runtime here, said
# in docs/sandbox.md. ROCm's needs were not measured (no AMD GPU): the same allowances apply.
# SandboxPlan.gpu_runtime turns both on.
AF_UNIX = 1


def default_nproc() -> int:
    """Processes and threads of one worker: torch's intra-op pool has one thread per core, a CUDA
    context a dozen, Triton's compiler a few processes."""
    return max(256, 4 * (os.cpu_count() or 1))


def plan(mode: str, *, writable: Sequence[str], readable: Sequence[str] = (), gpu: bool = False,
         nproc: int | None = None, file_size_bytes: int | None = None,
         cpu_seconds: int | None = None) -> SandboxPlan | None:
    """The plan of one worker: the system and Python folders plus `readable` to read, `writable` to
    write, GPU device files when `gpu`. None when `mode` is off."""
    if mode not in MODES:
        raise ValueError(f"sandbox mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "off":
        return None
    return SandboxPlan(mode=mode, readable=system_roots() + tuple(_existing(readable)),
                       writable=tuple(_existing(writable)),
                       devices=tuple(_existing(BASIC_DEVICES)) + (gpu_devices() if gpu else ()),
                       nproc=nproc or default_nproc(), file_size_bytes=file_size_bytes, cpu_seconds=cpu_seconds,
                       gpu_runtime=gpu)


# ------------------------------------------------------------------------------------ syscalls
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME = 0x10000000, 0x20000000, 0x40000000, 0x00000080
PR_SET_NO_NEW_PRIVS = 38


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def _unshare(flags: int) -> None:
    _check(_LIBC.unshare(ctypes.c_int(flags)), "unshare")


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on x86_64 and aarch64.
_NR_LANDLOCK_CREATE_RULESET, _NR_LANDLOCK_ADD_RULE, _NR_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_LL_MAKE_CHAR, _LL_MAKE_BLOCK = 1 << 6, 1 << 11
_LL_REFER, _LL_TRUNCATE, _LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_LL_NET_BIND_TCP, _LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
_LL_SCOPE_ABSTRACT_UNIX, _LL_SCOPE_SIGNAL = 1 << 0, 1 << 1
_LL_RULE_PATH_BENEATH = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none or disabled)."""
    res = _LIBC.syscall(_NR_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(res))


def _fs_access(abi: int) -> int:
    handled = (1 << 13) - 1  # EXECUTE .. MAKE_SYM (ABI 1)
    if abi >= 2:
        handled |= _LL_REFER
    if abi >= 3:
        handled |= _LL_TRUNCATE
    if abi >= 5:
        handled |= _LL_IOCTL_DEV
    return handled


def _apply_landlock(p: SandboxPlan, abi: int, applied: list[str]) -> None:
    handled = _fs_access(abi)
    file_read = _LL_EXECUTE | _LL_READ_FILE
    file_rw = (_LL_READ_FILE | _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0))
    device = file_rw | (_LL_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled, _LL_NET_BIND_TCP | _LL_NET_CONNECT_TCP if abi >= 4 else 0,
                        _LL_SCOPE_ABSTRACT_UNIX | _LL_SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    ruleset = _check(_LIBC.syscall(_NR_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        rules = [(path, file_read, _LL_READ_DIR) for path in p.readable]
        rules += [(path, handled & ~(_LL_MAKE_CHAR | _LL_MAKE_BLOCK | _LL_IOCTL_DEV), 0) for path in p.writable]
        rules += [(path, device, _LL_READ_DIR) for path in p.devices]
        if p.gpu_runtime:  # opened here, in the worker: /proc/self is the worker's own /proc/<pid>
            rules.append(("/proc/self", file_rw, _LL_READ_DIR))
        for path, access, dir_only in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # gone since the plan was made: nothing to allow
            try:
                if os.path.isdir(path):
                    access = (access | dir_only) & handled
                else:  # a file rule may only hold file rights
                    access &= handled & (_LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | _LL_TRUNCATE | _LL_IOCTL_DEV)
                rule = _PathBeneath(access, fd)
                _check(_LIBC.syscall(_NR_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                                     ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        _check(_LIBC.syscall(_NR_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    applied.append(LANDLOCK_FS)
    if abi >= 4:
        applied.append(LANDLOCK_TCP)
    if abi >= 6:
        applied.append(LANDLOCK_SCOPE)


# seccomp (include/uapi/linux/seccomp.h, filter.h, audit.h)
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                    | CLONE_NEWNET | CLONE_NEWTIME)
# Refused system calls (with EPERM) by name. Why each: socket = any network or local socket (a
# socketpair is fine: it reaches nobody); setsid/setpgid = leaving the process group the parent
# kills; set*id = taking root's real uid back (root is exempt from RLIMIT_NPROC); the rest are
# ways to reach the machine beyond the worker (debugging other processes, mounts, namespaces,
# keyrings, eBPF, perf events, io_uring, kernel modules, the clock, files by handle, swap...).
_REFUSED = ("socket", "setsid", "setpgid", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
            "setfsuid", "setfsgid", "setgroups", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
            "pidfd_getfd", "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "fsopen", "fsmount",
            "move_mount", "open_tree", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "bpf",
            "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
            "open_by_handle_at", "name_to_handle_at", "init_module", "finit_module", "delete_module",
            "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "settimeofday",
            "clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl", "vhangup", "fanotify_init",
            "mknod", "mknodat", "iopl", "ioperm")
_SYSCALLS = {
    "x86_64": dict(arch=0xC000003E, seccomp=317, clone=56, clone3=435, x32=True, nr=dict(
        socket=41, setsid=112, setpgid=109, setuid=105, setgid=106, setreuid=113, setregid=114, setresuid=117,
        setresgid=119, setfsuid=122, setfsgid=123, setgroups=116, ptrace=101, process_vm_readv=310,
        process_vm_writev=311, kcmp=312, pidfd_getfd=438, mount=165, umount2=166, pivot_root=155, chroot=161,
        unshare=272, setns=308, fsopen=430, fsmount=432, move_mount=429, open_tree=428, fspick=433,
        mount_setattr=442, keyctl=250, add_key=248, request_key=249, bpf=321, perf_event_open=298,
        userfaultfd=323, io_uring_setup=425, io_uring_enter=426, io_uring_register=427, open_by_handle_at=304,
        name_to_handle_at=303, init_module=175, finit_module=313, delete_module=176, kexec_load=246,
        kexec_file_load=320, reboot=169, swapon=167, swapoff=168, acct=163, settimeofday=164, clock_settime=227,
        clock_adjtime=305, adjtimex=159, syslog=103, quotactl=179, vhangup=153, fanotify_init=300, mknod=133,
        mknodat=259, iopl=172, ioperm=173)),
    "aarch64": dict(arch=0xC00000B7, seccomp=277, clone=220, clone3=435, x32=False, nr=dict(
        socket=198, setsid=157, setpgid=154, setuid=146, setgid=144, setreuid=145, setregid=143, setresuid=147,
        setresgid=149, setfsuid=151, setfsgid=152, setgroups=159, ptrace=117, process_vm_readv=270,
        process_vm_writev=271, kcmp=272, pidfd_getfd=438, mount=40, umount2=39, pivot_root=41, chroot=51,
        unshare=97, setns=268, fsopen=430, fsmount=432, move_mount=429, open_tree=428, fspick=433,
        mount_setattr=442, keyctl=219, add_key=217, request_key=218, bpf=280, perf_event_open=241,
        userfaultfd=282, io_uring_setup=425, io_uring_enter=426, io_uring_register=427, open_by_handle_at=265,
        name_to_handle_at=264, init_module=105, finit_module=273, delete_module=106, kexec_load=104,
        kexec_file_load=294, reboot=142, swapon=224, swapoff=225, acct=89, settimeofday=170, clock_settime=112,
        clock_adjtime=266, adjtimex=171, syslog=116, quotactl=60, vhangup=58, fanotify_init=262, mknodat=33)),
}


def seccomp_program(machine: str | None = None, refused: Sequence[str] = _REFUSED,
                    unix_sockets: bool = False) -> bytes:
    """The BPF filter for this machine's architecture (x86_64, aarch64): `refused` by name, and clone
    with namespace flags. `unix_sockets`: socket() is allowed for AF_UNIX only (GPU workers: see
    SandboxPlan.gpu_runtime). (The tests pass a shorter list to play a container that refuses namespaces.)"""
    table = _SYSCALLS[machine or _platform.machine()]
    deny = _RET_ERRNO | errno.EPERM
    insns: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, 4)]          # A = arch
    insns.append((_JEQ_K, 1, 0, table["arch"]))                               # foreign ABI (int 0x80): refuse
    insns.append((_RET_K, 0, 0, deny))
    insns.append((_LD_W_ABS, 0, 0, 0))                                        # A = syscall number
    if table["x32"]:
        insns.append((_JGE_K, 0, 1, 0x40000000))                              # x32 syscalls: refuse
        insns.append((_RET_K, 0, 0, deny))
    if unix_sockets and "socket" in refused:
        insns.append((_JEQ_K, 0, 4, table["nr"]["socket"]))
        insns.append((_LD_W_ABS, 0, 0, 16))                                   # domain (low word of arg 0)
        insns.append((_JEQ_K, 0, 1, AF_UNIX))
        insns.append((_RET_K, 0, 0, _RET_ALLOW))
        insns.append((_RET_K, 0, 0, deny))                                    # other syscalls jump here, A intact
    for name in refused:
        nr = table["nr"].get(name)
        if nr is not None:
            insns.append((_JEQ_K, 0, 1, nr))
            insns.append((_RET_K, 0, 0, deny))
    insns.append((_JEQ_K, 0, 1, table["clone3"]))                             # its flags are behind a pointer:
    insns.append((_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))                   # ENOSYS, libc falls back to clone
    insns.append((_JEQ_K, 0, 3, table["clone"]))
    insns.append((_LD_W_ABS, 0, 0, 16))                                       # clone flags (low word of arg 0)
    insns.append((_JSET_K, 0, 1, _NAMESPACE_FLAGS))
    insns.append((_RET_K, 0, 0, deny))
    insns.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("HBBI", *i) for i in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_seccomp(refused: Sequence[str] = _REFUSED, unix_sockets: bool = False) -> None:
    """Install the filter on every thread of this process (needs no_new_privs or CAP_SYS_ADMIN)."""
    table = _SYSCALLS.get(_platform.machine())
    if table is None:
        raise OSError(errno.ENOSYS, f"no syscall table for {_platform.machine()}")
    prog = seccomp_program(refused=refused, unix_sockets=unix_sockets)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_LIBC.syscall(ctypes.c_long(table["seccomp"]), ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
                         ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog)), "seccomp")


# --------------------------------------------------------------------------------------- enter
def _limit(which: int, value: int | None) -> None:
    if value is None:
        return
    soft, hard = resource.getrlimit(which)
    new_hard = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (new_hard, new_hard))


def _enter_namespaces(applied: list[str], missing: dict[str, str]) -> None:
    uid, gid = os.geteuid(), os.getegid()
    try:
        if uid == 0:
            # root is exempt from RLIMIT_NPROC by its real uid: give the real uid away, keep the
            # effective one (files are still opened as root; the process limit now applies)
            os.setresuid(NOBODY_UID, 0, 0)
        _unshare(CLONE_NEWUSER | CLONE_NEWNET)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
        applied += [USER_NAMESPACE, NETWORK_NAMESPACE]
        return
    except OSError as exc:
        if uid == 0 and os.getuid() != 0 and os.geteuid() == 0:
            with contextlib.suppress(OSError):  # still in the first namespace: take the real uid back
                os.setresuid(0, 0, 0)
        missing[USER_NAMESPACE] = f"unshare(CLONE_NEWUSER) failed: {exc.strerror or exc}"
    try:
        _unshare(CLONE_NEWNET)  # root (CAP_SYS_ADMIN) can do without a user namespace
        applied.append(NETWORK_NAMESPACE)
    except OSError as exc:
        missing[NETWORK_NAMESPACE] = f"unshare(CLONE_NEWNET) failed: {exc.strerror or exc}"


def enter(p: SandboxPlan) -> dict[str, Any]:
    """Confine this process (and everything it starts) as `p` says. Call it while the process is
    single-threaded (namespaces refuse threaded callers; a Landlock domain covers only the calling
    thread and the threads it starts later). Returns {"applied": [...], "missing": {part: why}};
    with `p.mode == "require"` a missing part raises SandboxError instead."""
    applied: list[str] = []
    missing: dict[str, str] = {}
    try:
        with contextlib.suppress(OSError):  # raising one's own score needs no privilege
            _write("/proc/self/oom_score_adj", "1000")
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _limit(resource.RLIMIT_FSIZE, p.file_size_bytes)
        if p.cpu_seconds:
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            cap = p.cpu_seconds + 5 if hard == resource.RLIM_INFINITY else min(p.cpu_seconds + 5, hard)
            resource.setrlimit(resource.RLIMIT_CPU, (min(p.cpu_seconds, cap), cap))
        applied.append(RESOURCE_LIMITS)
    except (OSError, ValueError) as exc:
        missing[RESOURCE_LIMITS] = f"setrlimit failed: {exc}"
    _enter_namespaces(applied, missing)
    if USER_NAMESPACE in applied and p.nproc:
        try:  # counted per user namespace: this worker's processes and threads only
            _limit(resource.RLIMIT_NPROC, p.nproc)
            applied.append(PROCESS_LIMIT)
        except (OSError, ValueError) as exc:
            missing[PROCESS_LIMIT] = f"setrlimit(RLIMIT_NPROC) failed: {exc}"
    elif p.nproc:
        missing[PROCESS_LIMIT] = ("needs a user namespace (outside one, RLIMIT_NPROC counts every process of the "
                                  "user, and root is exempt)")
    try:
        _check(_LIBC.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    except OSError as exc:
        missing[LANDLOCK_FS] = missing[SECCOMP] = str(exc)
    abi = landlock_abi()
    if abi < 1:
        missing.setdefault(LANDLOCK_FS, "the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock)")
    elif LANDLOCK_FS not in missing:  # no_new_privs held: Landlock can be entered
        try:
            _apply_landlock(p, abi, applied)
        except OSError as exc:
            missing[LANDLOCK_FS] = f"Landlock ABI {abi}: {exc}"
    if LANDLOCK_FS in applied:
        if abi < 4:
            missing[LANDLOCK_TCP] = f"Landlock ABI {abi} < 4 (Linux 6.7)"
        if abi < 6:
            missing[LANDLOCK_SCOPE] = f"Landlock ABI {abi} < 6 (Linux 6.12)"
    elif LANDLOCK_FS in missing:
        missing.setdefault(LANDLOCK_TCP, "no Landlock")
        missing.setdefault(LANDLOCK_SCOPE, "no Landlock")
    if SECCOMP not in missing:
        try:
            apply_seccomp(unix_sockets=p.gpu_runtime)
            applied.append(SECCOMP)
        except OSError as exc:
            missing[SECCOMP] = f"seccomp filter: {exc}"
    if missing and p.mode == "require":
        raise SandboxError(errno.EPERM, "the OS sandbox is incomplete and AMDKV_SANDBOX=require: "
                           + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    result = {"applied": [x for x in PARTS if x in applied], "missing": missing}
    APPLIED.clear()
    APPLIED.update(result)
    return result


# What enter() did in this process (a worker reports it with its job: verdict env.sandbox).
APPLIED: dict[str, Any] = {}


def summary(applied: dict[str, Any] | None, mode: str) -> dict[str, Any]:
    """What a verdict's `env.sandbox` says: the mode, the parts in force and what was missing."""
    if mode == "off" or not applied:
        return {"mode": mode, "applied": [], "missing": {} if mode == "off" else {"all": "not entered"}}
    return {"mode": mode, "applied": list(applied.get("applied", [])), "missing": dict(applied.get("missing", {}))}


# --------------------------------------------------------------------------------------- probe
def _self_test(scratch: str) -> dict[str, Any]:
    """After enter(): does the kernel refuse what it should? (the probe's evidence)"""
    import socket

    out: dict[str, Any] = {}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
            out[name] = "allowed"
        except OSError as exc:
            out[name] = f"refused ({errno.errorcode.get(exc.errno, exc.errno)})"

    attempt("write_outside_scratch", lambda: open(os.path.join(os.path.dirname(scratch), "amdkv-probe-escape"), "w"))
    attempt("write_scratch", lambda: open(os.path.join(scratch, "ok"), "w").close())
    attempt("read_home", lambda: os.listdir(os.path.expanduser("~")))
    attempt("inet_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
    attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
    attempt("parent_environ", lambda: open(f"/proc/{os.getppid()}/environ", "rb").read(1))
    attempt("setsid", os.setsid)
    return out


def probe() -> dict[str, Any]:
    """Enter a representative plan in a forked child of this (single-threaded, throwaway) process and
    report what worked; the parent keeps its freedom to remove the probe's folder."""
    with tempfile.TemporaryDirectory(prefix="amdkv-sandbox-probe-") as tmp:
        scratch = os.path.join(tmp, "scratch")
        os.mkdir(scratch)
        p = plan("auto", writable=[scratch], nproc=64, file_size_bytes=1 << 30, cpu_seconds=60)
        assert p is not None
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: confine, test, report, leave
            os.close(read_end)
            try:
                info: dict[str, Any] = {"euid": os.geteuid(), "kernel": _platform.release(),
                                        "machine": _platform.machine(), "landlock_abi": landlock_abi()}
                info.update(enter(p))
                info["self_test"] = _self_test(scratch)
                os.write(write_end, json.dumps(info).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        os.close(read_end)
        os.waitpid(pid, 0)
        return json.loads(b"".join(chunks) or b"{}")


@functools.lru_cache(maxsize=1)
def capabilities() -> dict[str, Any]:
    """What this machine's kernel lets a worker's sandbox do (probed once per process in a fresh
    child: namespaces cannot be tried in a threaded process, and a confined process stays so)."""
    from amdkv.process import with_package_on_path

    try:
        res = subprocess.run([sys.executable, "-m", "amdkv.verify.os_sandbox", "probe"], capture_output=True,
                             text=True, timeout=60, env=with_package_on_path(os.environ))
        lines = res.stdout.strip().splitlines()
        if not lines:
            raise ValueError(f"it printed nothing (exit code {res.returncode}): {res.stderr.strip()[-300:]}")
        data = json.loads(lines[-1])
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"applied": [], "missing": {p: f"the probe failed: {exc}" for p in PARTS}, "probe_error": str(exc)}
    return data


def describe_missing(missing: dict[str, str]) -> str:
    return "; ".join(f"{part} ({why})" for part, why in missing.items())


_WARNED: set[str] = set()


def status(mode: str) -> dict[str, Any]:
    """What the sandbox of this machine's workers holds under `mode` (a verdict's predicted
    `env.sandbox`; the worker reports what it really entered). `require` with a missing part raises
    SandboxError; `auto` says once per process on stderr what is missing."""
    if mode == "off":
        return summary(None, mode)
    result = summary(capabilities(), mode)
    if result["missing"]:
        text = describe_missing(result["missing"])
        if mode == "require":
            raise SandboxError(errno.EPERM, f"the OS sandbox cannot be complete on this machine: {text}")
        if text not in _WARNED:
            _WARNED.add(text)
            print(f"amdkv: the OS sandbox of worker processes lacks: {text}. Candidates run with the other "
                  "parts (AMDKV_SANDBOX=require refuses to verify without all of them; docs/sandbox.md)",
                  file=sys.stderr, flush=True)
    return result


# ------------------------------------------------------------------------------------ launcher
def main(argv: Sequence[str] | None = None) -> int:
    """`python -m amdkv.verify.os_sandbox probe`: print what works here as JSON.
    `python -m amdkv.verify.os_sandbox run PLAN_JSON MODULE [ARGS...]`: enter the plan, then run
    MODULE as `python -m MODULE ARGS` in this process (how exec'd workers are confined)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["probe"]:
        print(json.dumps(probe(), sort_keys=True))
        return 0
    if len(args) >= 3 and args[0] == "run":
        enter(SandboxPlan.from_json(args[1]))
        import runpy

        sys.argv = [args[2]] + args[3:]
        runpy.run_module(args[2], run_name="__main__", alter_sys=True)
        return 0
    print("usage: python -m amdkv.verify.os_sandbox probe | run PLAN_JSON MODULE [ARGS...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
