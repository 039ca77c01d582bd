"""The OS sandbox of worker processes (amdkv/verify/os_sandbox.py, docs/sandbox.md): what this machine's
kernel provides, that the kernel really refuses what the sandbox says it refuses, that verdicts say
which parts were in force, and the test-only switch that turns the static checks off.

Every test here runs the real kernel mechanisms (namespaces, Landlock, seccomp, rlimits) in real
child processes. Where a part is missing on the machine running the tests, the tests that need it
are skipped and say which part and why. The one stand-in: `test_require_refuses...` replaces the
probe's answer by one that lacks a part (a kernel we cannot boot here).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from amdkv.config import VerifierConfig
from amdkv.errors import InfrastructureError
from amdkv.verify import os_sandbox, pool
from amdkv.verify.sandbox import run_python_module, with_package_on_path
from sandbox_support import APPLIED, CAPS, require_sandbox_parts



def test_probe_names_every_part_as_applied_or_missing_with_a_reason():
    assert set(CAPS["applied"]) | set(CAPS["missing"]) == set(os_sandbox.PARTS), CAPS
    assert all(isinstance(why, str) and why for why in CAPS["missing"].values())
    assert CAPS["landlock_abi"] == os_sandbox.landlock_abi()


def test_the_kernel_refuses_what_the_probe_says_it_refuses():
    """The probe's own child entered the sandbox and tried: a write beside its scratch folder, the
    home folder, a socket of each kind, a signal and /proc/<parent>/environ of its parent, setsid."""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS, os_sandbox.SECCOMP, os_sandbox.LANDLOCK_SCOPE)
    tried = CAPS["self_test"]
    assert tried["write_scratch"] == "allowed"
    for attempt in ("write_outside_scratch", "read_home", "inet_socket", "unix_socket", "signal_parent",
                    "parent_environ", "setsid"):
        assert tried[attempt].startswith("refused"), (attempt, tried)


def test_seccomp_programs_are_well_formed_for_each_architecture():
    for machine in ("x86_64", "aarch64"):
        prog = os_sandbox.seccomp_program(machine)
        assert len(prog) % 8 == 0 and 0 < len(prog) // 8 < 4096
        insns = [struct.unpack("HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
        assert insns[-1] == (0x06, 0, 0, 0x7FFF0000), "the filter ends by allowing what it did not refuse"
        for at, (code, jt, jf, _k) in enumerate(insns):
            if code & 0x07 == 0x05:  # a jump lands inside the program
                assert at + 1 + max(jt, jf) < len(insns), (machine, at)
        # the refused list resolves on both architectures (iopl/ioperm/mknod exist on x86_64 only)
        nrs = {k for _c, _t, _f, k in insns}
        assert os_sandbox._SYSCALLS[machine]["nr"]["socket"] in nrs


def test_plans_travel_as_json_and_off_means_none(tmp_path):
    plan = os_sandbox.plan("auto", writable=[str(tmp_path)], readable=[str(tmp_path / "missing")], gpu=False,
                           nproc=100, file_size_bytes=1 << 20, cpu_seconds=10)
    assert plan is not None and str(tmp_path) in plan.writable
    assert str(tmp_path / "missing") not in plan.readable  # only what exists is granted
    assert not [d for d in plan.devices if "nvidia" in d or "kfd" in d], "no GPU device files on cpu"
    assert os_sandbox.SandboxPlan.from_json(plan.to_json()) == plan
    assert os_sandbox.plan("off", writable=[str(tmp_path)]) is None
    with pytest.raises(ValueError, match="sandbox mode"):
        os_sandbox.plan("maybe", writable=[])


def _escape_module(tmp_path: Path) -> dict[str, str]:
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "amdkv_test_escape.py").write_text(
        "import os, socket, sys\n"
        "out = {}\n"
        "for name, path in (('inside', 'inside.txt'), ('outside', sys.argv[1])):\n"
        "    try:\n"
        "        open(path, 'w').write('x'); out[name] = 'written'\n"
        "    except OSError as exc:\n"
        "        out[name] = type(exc).__name__\n"
        "try:\n"
        "    socket.socket(socket.AF_INET, socket.SOCK_STREAM); out['socket'] = 'created'\n"
        "except OSError as exc:\n"
        "    out['socket'] = type(exc).__name__\n"
        "print(repr(out))\n")
    return dict(with_package_on_path(os.environ), PYTHONPATH=os.pathsep.join(
        [str(mods), with_package_on_path(os.environ)["PYTHONPATH"]]))


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_run_once_workers_write_only_in_their_folder(tmp_path, start):
    """sandbox.run_python_module (HIP capture, AMD compiles, task loading): forked or exec'd, the child
    writes in its own folder and nowhere else, and has no network."""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS, os_sandbox.SECCOMP)
    env = _escape_module(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside.txt"
    plan = os_sandbox.plan("auto", writable=[str(work)], readable=[str(tmp_path / "mods")])
    res = run_python_module("amdkv_test_escape", [str(outside)], timeout=120, env=env, cwd=str(work),
                            start=start, sandbox=plan)
    assert res.returncode == 0, res.stderr[-2000:]
    got = eval(res.stdout.strip().splitlines()[-1])  # noqa: S307 - our own module's repr of a dict
    assert got == {"inside": "written", "outside": "PermissionError", "socket": "PermissionError"}, got
    assert (work / "inside.txt").exists() and not outside.exists()
    # the same child without a plan: the write outside happens (the sandbox is what stopped it)
    res = run_python_module("amdkv_test_escape", [str(outside)], timeout=120, env=env, cwd=str(work), start=start)
    assert "'outside': 'written'" in res.stdout and outside.exists()


def test_require_refuses_to_verify_when_a_part_is_missing(monkeypatch):
    """Stand-in: the probe's answer is replaced by one lacking Landlock (a kernel we cannot boot here)."""
    from amdkv.verify.verifier import Verifier

    monkeypatch.setattr(os_sandbox, "capabilities", lambda: {
        "applied": [p for p in os_sandbox.PARTS if p != os_sandbox.LANDLOCK_FS],
        "missing": {os_sandbox.LANDLOCK_FS: "the kernel has no Landlock (test stand-in)"}})
    with pytest.raises(InfrastructureError, match="landlock_fs") as err:
        Verifier("cpu", spares=0, sandbox="require")
    assert "AMDKV_SANDBOX=auto" in (err.value.hint or "")
    with Verifier("cpu", spares=0, sandbox="auto") as verifier:  # auto: runs, and says what is missing
        assert verifier.sandbox_status["missing"] == {os_sandbox.LANDLOCK_FS: "the kernel has no Landlock (test stand-in)"}


def _relu():
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    return task, solution_path("l1_relu", "triton").read_text()


def test_verdicts_say_which_sandbox_parts_held():
    from amdkv.verify.verifier import Verifier

    task, good = _relu()
    with Verifier("cpu", spares=1) as verifier:
        on = verifier.verify(task, source=good)
    with Verifier("cpu", spares=1, sandbox="off") as verifier:
        off = verifier.verify(task, source=good)
        off_identity = verifier.identity
    assert on.status == off.status == "ok", (on.diagnostics, off.diagnostics)
    assert on.env["sandbox"] == {"mode": "auto", "applied": CAPS["applied"], "missing": CAPS["missing"]}
    assert off.env["sandbox"] == {"mode": "off", "applied": [], "missing": {}}
    assert on.env["static_checks"] == "on"
    assert on.env["verifier_identity"] != off_identity, "the sandbox is part of the verdict-cache key"


def test_skipping_static_checks_never_gives_ok_and_is_never_cached(tmp_path):
    """AMDKV_UNSAFE_SKIP_STATIC_CHECKS: a config field like every setting; a correct candidate is
    `unverifiable`/`static_checks_skipped`, a cheat the static checks would stop runs (and fails on its
    own or not), nothing made so is stored in the verdict cache."""
    from amdkv.verify.verifier import Verifier

    assert VerifierConfig.from_env({"AMDKV_UNSAFE_SKIP_STATIC_CHECKS": "1"}).unsafe_skip_static_checks
    assert "unsafe_skip_static_checks" in VerifierConfig().verdict_settings()
    task, good = _relu()
    cache = tmp_path / "cache"
    with Verifier("cpu", spares=1, unsafe_skip_static_checks=True, verdict_cache=True,
                  cache_dir=str(cache)) as verifier:
        v = verifier.verify(task, source=good)
        cheat = verifier.verify(task, source=good.replace("import triton\n", "import triton\nimport subprocess\n"))
    assert (v.status, v.reason, v.correct) == ("unverifiable", "static_checks_skipped", None), v.diagnostics
    assert v.env["static_checks"].startswith("skipped") and "not a verified pass" in v.diagnostics
    assert cheat.status != "ok" and cheat.reason != "import_not_allowed"  # the static rule did not run
    assert not list((cache / "verdicts").rglob("*.json")), "a verdict made without static checks was cached"
    with Verifier("cpu", spares=1, verdict_cache=True, cache_dir=str(cache)) as verifier:
        again = verifier.verify(task, source=good)
    assert again.status == "ok" and not again.cache_hit


# Plays a container whose seccomp profile refuses namespaces (Docker's default does for unprivileged
# containers): a real filter on unshare/setns, then the amdkv CLI in the same process.
REFUSE_NAMESPACES = (
    "import ctypes, runpy, sys\n"
    "from amdkv.verify import os_sandbox\n"
    "ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as a container runtime sets it\n"
    "os_sandbox.apply_seccomp(('unshare', 'setns'))\n"
    "sys.argv = ['amdkv'] + sys.argv[1:]\n"
    "runpy.run_module('amdkv.cli', run_name='__main__', alter_sys=True)\n")


def test_amdkv_env_reports_the_sandbox_and_a_machine_that_refuses_namespaces_still_verifies():
    """`amdkv env` here names every part as applied or missing. Then a real kernel refusal, no
    stand-in: `amdkv env` and `amdkv verify` run under a seccomp filter that refuses unshare(), as a
    locked-down container does. Both finish; the parts the kernel refused are named missing with the
    kernel's reason, the rest still hold, the verdict is ok. (The three commands run at once.)"""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS, os_sandbox.SECCOMP)
    from amdkv.tasks.builtin import solution_path, task_path

    env = dict(with_package_on_path(os.environ), AMDKV_SANDBOX="auto")  # the session cache: relu's reference is in it
    refusing = [sys.executable, "-c", REFUSE_NAMESPACES]
    runs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for cmd in (
        [sys.executable, "-m", "amdkv.cli", "env", "--json"], refusing + ["env", "--json"],
        refusing + ["verify", str(task_path("l1_relu")), str(solution_path("l1_relu")), "--device", "cpu",
                    "--trials", "1", "--no-verdict-cache", "--json"])]
    (here_out, _), (env_out, env_err), (verify_out, verify_err) = (p.communicate(timeout=300) for p in runs)
    assert [p.returncode for p in runs] == [0, 0, 0], (env_err[-2000:], verify_err[-2000:])
    here = json.loads(here_out)["sandbox"]
    assert here["mode"] == "auto" and set(here["applied"]) | set(here["missing"]) == set(os_sandbox.PARTS)
    assert here["applied"] == CAPS["applied"]

    refused = {os_sandbox.USER_NAMESPACE, os_sandbox.NETWORK_NAMESPACE, os_sandbox.PROCESS_LIMIT}
    sandbox = json.loads(env_out)["sandbox"]
    assert set(sandbox["missing"]) == refused, sandbox
    assert "Operation not permitted" in sandbox["missing"][os_sandbox.USER_NAMESPACE]
    assert set(sandbox["applied"]) == set(APPLIED) - refused, sandbox
    verdict = json.loads(verify_out)
    assert verdict["status"] == "ok", verdict.get("diagnostics")
    assert verdict["env"]["sandbox"] == {"mode": "auto", "applied": sandbox["applied"], "missing": sandbox["missing"]}
    assert "lacks" in verify_err and "user_namespace" in verify_err, "auto says once what is missing"


def test_workers_import_from_pythonpath_folders(tmp_path):
    """The H200 failure of 2026-12-01, reproduced on cpu: packages installed with `pip --target DIR`
    and put on PYTHONPATH (there: typing_extensions, which torch imports first) must be importable
    by sandboxed workers. Here DIR holds a copy of typing_extensions that shadows the venv's one, so
    every worker's `import torch` reads DIR: the verdict is ok (before the fix: PermissionError in
    every worker, infra_error/harness_failure)."""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS)
    import typing_extensions

    from amdkv.tasks.builtin import solution_path, task_path

    site = tmp_path / "site"
    site.mkdir()
    (site / "typing_extensions.py").write_text(Path(typing_extensions.__file__).read_text(encoding="utf-8"),
                                               encoding="utf-8")
    env = with_package_on_path(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    probe = ("import os, sys, typing_extensions\n"
             "from amdkv.verify import os_sandbox\n"
             f"print(os.path.realpath({str(site)!r}) in os_sandbox.python_roots())\n")
    roots = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert roots.stdout.strip() == "True", roots.stderr[-2000:]
    run = subprocess.run([sys.executable, "-m", "amdkv.cli", "verify", str(task_path("l1_relu")),
                          str(solution_path("l1_relu")), "--device", "cpu", "--trials", "1",
                          "--no-verdict-cache", "--json"], env=env, capture_output=True, text=True, timeout=300)
    verdict = json.loads(run.stdout)
    assert verdict["status"] == "ok", verdict.get("diagnostics", "")[-2000:]
    assert "landlock_fs" in verdict["env"]["sandbox"]["applied"]


GPU_RUNTIME_CHILD = r"""
import json, os, socket, sys
from amdkv.verify import os_sandbox, pool
plan = os_sandbox.plan("auto", writable=[sys.argv[1]], gpu=sys.argv[2] == "gpu")
os_sandbox.enter(plan)
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except OSError as exc:
        out[name] = "refused"
attempt("unix_socket", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
attempt("inet_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
attempt("netlink_socket", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close())
attempt("own_proc_write", lambda: open("/proc/self/comm", "w").write("amdkv-worker"))
attempt("parent_proc_write", lambda: open(f"/proc/{os.getppid()}/comm", "w").write("x"))
attempt("proc_sys_write", lambda: open("/proc/sys/kernel/hostname", "w").write("x"))
print(json.dumps(out))
"""


def test_gpu_workers_get_what_a_gpu_runtime_needs_and_no_more(tmp_path):
    """What CUDA needed on the H200 to start inside the sandbox (os_sandbox.SandboxPlan.gpu_runtime):
    AF_UNIX sockets and writes beneath the worker's own /proc/<pid>. A GPU plan gets exactly that:
    TCP and netlink sockets, another process's /proc and /proc/sys stay refused; a CPU plan keeps
    refusing every socket and /proc write. Real seccomp and Landlock in a child process."""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS, os_sandbox.SECCOMP)
    env = with_package_on_path(os.environ)
    seen = {}
    for kind in ("gpu", "cpu"):
        r = subprocess.run([sys.executable, "-c", GPU_RUNTIME_CHILD, str(tmp_path), kind], capture_output=True,
                           text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        seen[kind] = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["gpu"]["unix_socket"] == "allowed" and seen["gpu"]["own_proc_write"] == "allowed", seen
    assert seen["cpu"]["unix_socket"] == "refused" and seen["cpu"]["own_proc_write"] == "refused", seen
    for kind in ("gpu", "cpu"):
        for attempt in ("inet_socket", "netlink_socket", "parent_proc_write", "proc_sys_write"):
            assert seen[kind][attempt] == "refused", (kind, attempt, seen)


GCC_IN_WORKER = r"""
import json, os, subprocess, sys
from amdkv.verify import os_sandbox, pool
from amdkv.verify.platform import PlatformInfo
root, scratch, in_dir = pool.make_worker_dirs()
# no torch here: its import starts threads, and a threaded process cannot enter a user namespace
env, _ = pool.worker_env(PlatformInfo("cpu", "cpu", False, True), scratch, os.environ, None)
src = os.path.join(scratch, "launcher.c")
with open(src, "w") as fh:
    fh.write("int amdkv_launch(void) { return 1; }\n")
plan = os_sandbox.plan("auto", writable=[scratch], readable=[in_dir], gpu=True)
os.environ.clear()
os.environ.update(env)
os_sandbox.enter(plan)
r = subprocess.run(["gcc", "-shared", "-fPIC", src, "-o", os.path.join(scratch, "launcher.so")],
                   capture_output=True, text=True)
print(json.dumps({"uids": os.getresuid(), "rc": r.returncode, "stderr": r.stderr[-500:],
                  "torch": "torch" in sys.modules}))
"""


def test_gcc_finds_its_temp_folder_in_a_worker_run_as_root(tmp_path):
    """Found on the H200 (session 7): as root, the sandbox keeps uid 0 only as the effective uid, so
    gcc (Triton builds its launcher with it inside the worker) ran in glibc's secure mode, lost
    TMPDIR, failed access() on the scratch folder and aborted on /tmp: every Triton candidate was a
    compile_error. The worker's real folders and environment (pool.make_worker_dirs, worker_env),
    the real sandbox, the real gcc."""
    require_sandbox_parts(os_sandbox.LANDLOCK_FS, os_sandbox.USER_NAMESPACE)
    if os.geteuid() != 0:
        pytest.skip("the real-uid hand-off happens only when the verifier runs as root")
    r = subprocess.run([sys.executable, "-c", GCC_IN_WORKER], capture_output=True, text=True,
                       env=with_package_on_path(os.environ), timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["uids"][0] != 0 and out["uids"][1] == 0, out  # the hand-off this test is about happened
    assert out["rc"] == 0, out["stderr"]


def test_a_root_worker_under_a_closed_folder_is_refused_with_the_fix():
    """The same hand-off, found again on the H200 (session 8): the fault suite's worker folders lay
    under a 0700 mkdtemp, gcc's access() with the worker's real ids failed on that parent, and every
    Triton candidate there was a compile_error. A GPU worker (the one that runs gcc) is now refused
    before it starts, with the folder that is closed and how to open it; a folder reachable by
    root's group is accepted. (pytest's own tmp_path lies under a 0700 folder: this test makes its
    folder in /tmp.)"""
    import shutil
    import tempfile

    from amdkv.verify.platform import PlatformInfo

    if os.geteuid() != 0:
        pytest.skip("the real-uid hand-off happens only when the verifier runs as root")
    closed = tempfile.mkdtemp(prefix="amdkv-closed-", dir="/tmp")  # mode 0700, as mkdtemp makes it
    try:
        assert pool.unreachable_for_root_worker(closed) is not None
        root, scratch, _ = pool.make_worker_dirs(closed)
        problem = pool.unreachable_for_root_worker(scratch)
        assert problem is not None and closed in problem
        os.chmod(closed, 0o750)  # root's group may search it now: the worker's real gid is root's
        assert pool.unreachable_for_root_worker(scratch) is None
        os.chmod(closed, 0o700)
        shutil.rmtree(root)
        gpu = PlatformInfo("cuda", "cuda:0", True, False)  # refused before anything starts: no GPU needed
        with pytest.raises(InfrastructureError) as err:
            pool.Spare(gpu, VerifierConfig(sandbox="auto"), base_tmp=closed)
        assert closed in str(err.value) and "TMPDIR=/tmp" in str(err.value.hint)
        assert os.listdir(closed) == [], "the refused spare left no folder"
    finally:
        shutil.rmtree(closed, ignore_errors=True)
