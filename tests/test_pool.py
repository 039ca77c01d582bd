"""The spare's job protocol (pool.Spare.run): the parent returns when the worker says DONE, without
waiting for the process to exit, and still gets exit codes, timeouts and stderr when there is no DONE.

The workers here are tiny Python scripts standing in for `python -m amdkv.verify.worker` so that the
timings are the protocol's, not torch's import time; the real worker is exercised end to end by
test_verify_cli.py and test_adversarial.py. The last tests start real forked spares from the fork
server (fork_server.py) and check what they hold, their exit codes, and that exec'd and forked spares
give the same verdict.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import pytest

from amdkv.verify.platform import detect_platform
from amdkv.verify.pool import Spare
from amdkv.verify.worker_process import STDOUT_KEEP_BYTES, ExecWorkerProcess
from amdkv.verify.worker import DONE_LINE
from amdkv.verify.worker_protocol import ReferenceJob

# what the scripted workers are sent (they read one line and ignore it)
JOB = ReferenceJob(task_path="unused.py", device="cpu", cases=[], report_path="unused.json")


def _scripted_spare(body: str) -> Spare:
    """A Spare whose process runs `body` after printing READY (the real constructor starts the
    real worker; here only the process differs)."""
    spare = Spare.__new__(Spare)
    spare.platform = detect_platform("cpu")
    spare.root = spare.workdir = tempfile.mkdtemp(prefix="amdkv-test-pool-")
    spare.stderr_path = os.path.join(spare.workdir, "worker_stderr.txt")
    script = "import sys, time, os\nprint('READY', flush=True)\nsys.stdin.readline()\n" + body
    spare.proc = ExecWorkerProcess(dict(os.environ), spare.workdir, spare.stderr_path, None,
                                   argv=[sys.executable, "-c", script])
    spare._ready = False
    spare._reaping = False
    spare.start_method, spare.fork_failure = "exec", None
    spare.ready_wait_s = 0.0
    return spare


def test_done_returns_without_waiting_for_exit_and_kills_the_group():
    spare = _scripted_spare(f"sys.stderr.write('diag text\\n'); sys.stderr.flush()\n"
                            f"print('before', flush=True)\nsys.stdout.write({DONE_LINE!r}); sys.stdout.flush()\n"
                            "time.sleep(60)\n")
    try:
        t0 = time.monotonic()
        res = spare.run(JOB, timeout=30)
        took = time.monotonic() - t0
        assert took < 10, f"run() waited {took:.1f} s: it must return at DONE, not at exit"
        assert res.returncode == 0 and not res.timed_out
        assert "before" in res.stdout and "AMDKV-WORKER-DONE" not in res.stdout
        assert "diag text" in res.stderr
        code = spare.proc.wait(10)  # the group was SIGKILLed, so the sleeper is gone
        assert code is not None and code < 0
    finally:
        spare.cleanup()


def test_exit_without_done_reports_the_exit_code():
    spare = _scripted_spare("sys.stderr.write('boom\\n'); sys.exit(3)\n")
    try:
        res = spare.run(JOB, timeout=30)
        assert res.returncode == 3 and not res.timed_out
        assert "boom" in res.stderr
    finally:
        spare.cleanup()


def test_timeout_without_done_kills_and_says_so():
    spare = _scripted_spare("time.sleep(60)\n")
    try:
        t0 = time.monotonic()
        res = spare.run(JOB, timeout=1.5)
        assert res.timed_out and time.monotonic() - t0 < 20
    finally:
        spare.cleanup()


def test_done_after_a_stdout_flood_is_still_seen_and_output_is_bounded():
    spare = _scripted_spare("sys.stdout.write('x' * (3 * 1024 * 1024) + '\\n')\n"
                            f"sys.stdout.write({DONE_LINE!r}); sys.stdout.flush()\ntime.sleep(60)\n")
    try:
        res = spare.run(JOB, timeout=30)
        assert res.returncode == 0 and not res.timed_out
        assert len(res.stdout) <= 2 * STDOUT_KEEP_BYTES + 1
    finally:
        spare.cleanup()


def test_done_text_inside_a_line_is_not_the_marker():
    spare = _scripted_spare(f"sys.stdout.write('say ' + {DONE_LINE!r}); sys.stdout.flush()\nsys.exit(5)\n")
    try:
        res = spare.run(JOB, timeout=30)
        assert res.returncode == 5, "a DONE that does not start a line must not end the job"
    finally:
        spare.cleanup()


# ------------------------------------------------------------------ forked spares (fork_server.py)
def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            inodes.add(target)
    return inodes


def test_forked_spare_holds_nothing_that_leads_back_to_the_fork_server():
    from amdkv.verify import fork_server

    spare = Spare(detect_platform("cpu"), None, start="fork")
    try:
        spare.wait_ready()
        server = fork_server.shared({"TRITON_INTERPRET": "1"})
        child, srv = _socket_inodes(spare.proc.pid), _socket_inodes(server.proc.pid)
        assert len(child) == 1, f"a forked worker should hold only its channel socket, holds {child}"
        assert not child & srv, "the forked worker shares a socket with the fork server"
        assert os.getpgid(spare.proc.pid) == spare.proc.pid, "a forked worker leads its own process group"
    finally:
        spare.cleanup()


def test_forked_spare_exit_codes_reach_the_parent():
    platform = detect_platform("cpu")
    idle = Spare(platform, None, start="fork")
    idle.wait_ready()
    idle.proc.close_idle()  # no job: the worker exits 0
    assert idle.proc.wait(30) == 0
    idle.cleanup()
    killed = Spare(platform, None, start="fork")
    killed.wait_ready()
    killed.proc.kill()
    assert killed.proc.wait(30) == -9
    killed.cleanup()


def test_exec_and_fork_spares_give_the_same_verdict(monkeypatch):
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.verifier import Verifier

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    verdicts = {}
    for method in ("exec", "fork"):
        monkeypatch.setenv("AMDKV_SPARE_START", method)
        with Verifier("cpu") as verifier:
            verdicts[method] = verifier.verify(task, solution_path(task.id, "triton"))
    assert verdicts["exec"].status == verdicts["fork"].status == "ok"
    assert verdicts["exec"].cases[0].max_abs_err == verdicts["fork"].cases[0].max_abs_err
    # where each worker's time and host CPU went (the throughput tables in docs/gpu.md read these)
    for method, v in verdicts.items():
        t = v.timings
        assert t["worker_cpu_s"] >= t["worker_job_cpu_s"] > 0, (method, t)
        assert 0 <= t["job_handoff_s"] < 5 and 0 <= t["done_handoff_s"] < 5, (method, t)
        assert v.env["spare_start"] == method
        assert "worker_gpu_peak_gib" not in t  # the CPU platform never initialises CUDA: no GPU peak to report
    # the exec'd worker imported torch and Triton itself; the forked one inherited them
    assert verdicts["exec"].timings["worker_cpu_s"] > verdicts["fork"].timings["worker_cpu_s"]


def test_unknown_start_method_is_a_clear_error(monkeypatch):
    from amdkv.errors import InfrastructureError
    from amdkv.verify.fork_server import start_method

    try:
        start_method("spawn")
    except InfrastructureError as exc:
        assert "fork" in str(exc) and "exec" in str(exc)
    else:
        raise AssertionError("spare_start=spawn was accepted")
    from amdkv.config import VerifierConfig
    from amdkv.errors import BadInputError

    monkeypatch.setenv("AMDKV_SPARE_START", "spawn")
    with pytest.raises(BadInputError, match="spare_start"):  # the config refuses it before any worker
        VerifierConfig.from_env()


def test_run_python_module_forked_and_exec_behave_alike(monkeypatch, tmp_path):
    """sandbox.run_python_module: exit code, stdout, stderr, argv, environment, cwd and the timeout
    are the same whether the module runs forked from the fork server or exec'd."""
    from amdkv.verify.sandbox import run_python_module

    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "amdkv_test_child.py").write_text(
        "import ctypes, os, sys, time\n"
        "print('out', sys.argv[1:], os.environ.get('AMDKV_TEST_MARK'), os.getcwd())\n"
        # what a C library (the CUDA driver reading CUDA_VISIBLE_DEVICES) sees: libc's getenv
        "getenv = ctypes.CDLL(None).getenv\n"
        "getenv.restype = ctypes.c_char_p\n"
        "print('libc sees', getenv(b'AMDKV_TEST_MARK'))\n"
        "print('err text', file=sys.stderr)\n"
        "if sys.argv[1] == 'sleep':\n    time.sleep(60)\n"
        "sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else 'bad: ' + sys.argv[1])\n")
    env = dict(os.environ, AMDKV_TEST_MARK="mark-42",
               PYTHONPATH=os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    for method in ("exec", "fork"):
        monkeypatch.setenv("AMDKV_SPARE_START", method)
        work = tmp_path / method
        work.mkdir()
        res = run_python_module("amdkv_test_child", ["3"], timeout=60, env=env, cwd=str(work))
        assert res.returncode == 3 and not res.timed_out, (method, res)
        assert "out ['3'] mark-42" in res.stdout and str(work) in res.stdout, (method, res.stdout)
        assert "libc sees b'mark-42'" in res.stdout, (method, res.stdout)
        assert "err text" in res.stderr, method
        res = run_python_module("amdkv_test_child", ["oops"], timeout=60, env=env, cwd=str(work))
        assert res.returncode == 1 and "bad: oops" in res.stderr, (method, res)
        t0 = time.monotonic()
        res = run_python_module("amdkv_test_child", ["sleep"], timeout=2, env=env, cwd=str(work))
        assert res.timed_out and time.monotonic() - t0 < 30, (method, res)
        assert sorted(p.name for p in work.iterdir()) == [], f"{method} left files in the work dir"


def test_the_host_memory_cap_counts_allocations_not_reserved_address_space(monkeypatch, tmp_path):
    """A child under a 2-GiB host-memory cap, forked or exec'd as the verifier starts them, first reserves
    6 GiB of read-only address space it never uses, as CUDA torch's libraries and GPU runtimes do before a
    candidate runs; then a 256-MiB allocation must succeed and a 4-GiB one must fail as MemoryError (a
    candidate's `runtime_error`/`oom`). Session 28, on the H100 image: under the old address-space cap
    on `cpu`, a correct candidate's 256-MiB allocation failed there. Real processes, nothing mocked."""
    from amdkv.verify.sandbox import run_python_module

    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "amdkv_test_mem_child.py").write_text(
        "import mmap, resource, sys\n"
        "print('data cap', resource.getrlimit(resource.RLIMIT_DATA)[0], flush=True)\n"
        "reserved = mmap.mmap(-1, 6 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)\n"
        "print('reserved', flush=True)\n"
        "small = bytearray(256 << 20)\n"
        "print('small allocated', flush=True)\n"
        "try:\n    big = bytearray(4 << 30)\nexcept MemoryError:\n    print('big refused')\n    sys.exit(0)\n"
        "sys.exit(5)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(pkg), os.environ.get("PYTHONPATH", "")]))
    for method in ("exec", "fork"):
        monkeypatch.setenv("AMDKV_SPARE_START", method)
        res = run_python_module("amdkv_test_mem_child", [], timeout=120, env=env, cwd=str(tmp_path),
                                host_memory_bytes=2 << 30)
        assert f"data cap {2 << 30}" in res.stdout, (method, res.stdout, res.stderr[-2000:])
        assert "reserved\nsmall allocated\nbig refused" in res.stdout, (method, res.stdout, res.stderr[-2000:])
        assert res.returncode == 0, (method, res.returncode, res.stderr[-2000:])


def test_a_forked_spare_that_cannot_start_falls_back_to_exec(monkeypatch):
    """A fork-server problem costs speed, never verdicts: the spare is exec'd instead and says why."""
    from amdkv.errors import InfrastructureError
    from amdkv.verify import fork_server

    def broken_server(env):
        raise InfrastructureError("simulated: the fork server did not start")

    monkeypatch.setattr(fork_server, "shared", broken_server)
    spare = Spare(detect_platform("cpu"), None, start="fork")
    try:
        assert spare.start_method == "exec" and "simulated" in (spare.fork_failure or "")
        spare.wait_ready()
        assert isinstance(spare.proc, ExecWorkerProcess)
    finally:
        spare.cleanup()


def test_a_forked_spare_that_dies_starting_up_is_replaced_by_an_exec_one():
    """A device this machine lacks makes the worker die before READY, forked or exec'd: the forked
    one is replaced by an exec'd one, which then fails the same way with a clear error."""
    from amdkv.errors import InfrastructureError

    from amdkv.verify.worker_protocol import WORKER_SETTINGS_ENV, WorkerSettings

    spare = Spare(detect_platform("cpu"), None, start="fork",
                  extra_env={WORKER_SETTINGS_ENV: WorkerSettings(device="cuda:77").to_json()})
    try:
        try:
            spare.wait_ready(timeout=60)
        except InfrastructureError as exc:
            assert "start-up" in str(exc)
        else:
            raise AssertionError("a worker for cuda:77 started")
        assert spare.start_method == "exec" and "start-up" in (spare.fork_failure or "")
    finally:
        spare.cleanup()


def test_verdicts_name_how_the_worker_was_started(monkeypatch):
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.verifier import Verifier

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    monkeypatch.setenv("AMDKV_SPARE_START", "fork")
    with Verifier("cpu") as verifier:
        verdict = verifier.verify(task, solution_path(task.id, "triton"))
    assert verdict.status == "ok" and verdict.env["spare_start"] == "fork"


PARENT_SCRIPT = """
import sys, time
from amdkv.verify import fork_server
from amdkv.verify.temp_folders import make_temp_folder
fork_server.shared({"TRITON_INTERPRET": "1"})     # the server is up
told = make_temp_folder("worker")                   # handed to the server below
fork_server.shared({"TRITON_INTERPRET": "1"}).own(told)
untold = make_temp_folder("candidates")             # killed before it could say so
print(told, untold, flush=True)
time.sleep(600)
"""


def test_a_killed_parent_leaves_no_temp_folder_even_one_it_never_announced(tmp_path):
    """The parent is SIGKILLed after making a folder it never told its fork server about (the window
    between mkdtemp and the fork request or `own` message: the crash test left such folders in about
    one run of ten): the server finds it by the parent's pid in its name and removes it. A folder of
    another process with the same prefix stays."""
    import signal
    import subprocess

    from amdkv.process import with_package_on_path
    from amdkv.verify.temp_folders import folders_of, make_temp_folder

    env = with_package_on_path(dict(os.environ, TMPDIR=str(tmp_path)))
    parent = subprocess.Popen([sys.executable, "-c", PARENT_SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
    told, untold = parent.stdout.readline().split()
    assert os.path.isdir(told) and os.path.isdir(untold)
    assert f"-{parent.pid}-" in os.path.basename(untold)
    old = tempfile.tempdir
    tempfile.tempdir = str(tmp_path)
    try:
        bystander = make_temp_folder("worker")  # this test's pid: not the killed parent's
    finally:
        tempfile.tempdir = old
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while (os.path.isdir(told) or os.path.isdir(untold)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.isdir(told) and not os.path.isdir(untold)
    assert folders_of(parent.pid, str(tmp_path)) == []
    assert os.path.isdir(bystander)
