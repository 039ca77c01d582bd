"""A worker fork server: one process per verifier parent that has imported torch and Triton once and
forks each spare worker from that state.

Why: an exec'd spare (`python -m amdkv.verify.worker`) starts an interpreter and imports torch and
Triton itself, 1.6-1.8 CPU-seconds on the dev machine and several seconds on a CUDA host, for every
candidate. On an H200 host verifying two GPUs at once those start-ups kept 32 cores 86-89% busy and
bounded the throughput (docs/gpu.md). A fork costs milliseconds and shares the imported pages.

Why not `multiprocessing`'s forkserver: it re-runs the parent's `__main__` module in every child
(its "main module fixup"), so a user script without an `if __name__ == "__main__"` guard would run
again inside each worker. This server imports exactly `amdkv.verify.worker_preload` and nothing
of the parent's.

Protocol (AF_UNIX SOCK_SEQPACKET, so each message is one datagram, fds ride along):
  server -> parent  {"ready": true}                      once, after the preload imports
  parent -> server  {"id": N, "spec": {...}} + one fd    fork a worker; the fd is its channel
  parent -> server  {"own": "/path"}                     remove this folder if the parent dies
  server -> parent  {"id": N, "pid": P} or {"id": N, "error": "..."}
  server -> parent  {"exit": P, "code": C}               a worker ended (C as Popen.returncode)
The server never initialises a GPU and starts no threads (children of a threaded process can inherit
held locks; importing torch itself starts one native helper thread, which no forked worker has
tripped over in the GPU and CPU runs); it reaps children on SIGCHLD through a wake-up pipe. It exits when the parent closes
its end; then it first kills the process group of every child still running and removes the folders
of its children (spec "owned_dir") and those the parent handed it ("own"), so a killed parent (a
SIGKILLed `amdkv eval`) leaves no worker and no temp folder behind. A forked child closes the
server's sockets before anything else runs in it, so a candidate cannot ask the server for anything,
enters the OS sandbox (os_sandbox.py) while it is still single-threaded, and dies with the server
(PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

from amdkv.errors import InfrastructureError

MAX_MESSAGE = 1 << 20
START_TIMEOUT_S = 180.0


# ------------------------------------------------------------------------------------------ server
def _send(sock: socket.socket, obj: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def _reap(sock: socket.socket) -> list[int]:
    """Collect exited children, tell the parent their exit codes; returns their pids."""
    done = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return done
        if pid == 0:
            return done
        done.append(pid)
        with contextlib.suppress(OSError):  # the parent is gone: nobody to tell
            _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def _isolate(env: dict[str, str], cwd: str, stdout_path: str, stderr_path: str, mem_cap_bytes: int | None,
             sandbox: dict[str, Any] | None = None, server_pid: int | None = None) -> None:
    """Make a freshly forked child what an exec'd process started by sandbox.run_process would be:
    its own session (the parent kills its whole group), limits, stdin from /dev/null, stdout and
    stderr to files, its work dir and environment. The environment is replaced before anything
    reads it: Triton reads its settings (cache dir) on use, CUDA reads CUDA_VISIBLE_DEVICES at its
    first call, which happens in the child and never in the server. Then the OS sandbox
    (os_sandbox.enter: the child is still single-threaded, as namespaces and Landlock need), and
    death with the server: a child outlives nothing it was started for."""
    os.setsid()
    import tempfile

    from amdkv.process import cap_host_memory

    cap_host_memory(mem_cap_bytes)
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, stdout_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND),
                            (2, stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)):
        new = os.open(path, flags, 0o600)
        os.dup2(new, fd)
        os.close(new)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # re-read TMPDIR
    if sandbox:
        from amdkv.verify import os_sandbox

        try:
            os_sandbox.enter(os_sandbox.SandboxPlan.from_json(sandbox))
        except os_sandbox.SandboxError as exc:
            print(f"amdkv worker: {exc}", file=sys.stderr, flush=True)
            os._exit(71)
    _die_with(server_pid)


def _die_with(server_pid: int | None) -> None:
    """SIGKILL this child when the fork server dies (the server is single-threaded, so the thread
    that forked us is the server itself). Set last: a change of credentials clears it."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if server_pid is not None and os.getppid() != server_pid:  # the server died before that
        os._exit(70)


def _child_main(spec: dict[str, Any], fds: list[int], server_pid: int) -> None:
    """What a forked child runs: a spare worker (kind "worker", `fds` = its channel) or a module's
    `__main__` with arguments (kind "module", like `python -m MODULE ARGS...`)."""
    _isolate(spec["env"], spec["cwd"], spec["stdout_path"], spec["stderr_path"], spec.get("mem_cap_bytes"),
             spec.get("sandbox"), server_pid)
    if spec["kind"] == "worker":
        from amdkv.verify import worker

        worker.serve_forked(fds[0])
    import runpy
    import traceback

    # like `python -m` with this environment: its PYTHONPATH entries first (the server's sys.path
    # came from the parent's environment at the server's start)
    for entry in reversed([p for p in spec["env"].get("PYTHONPATH", "").split(os.pathsep) if p]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    sys.argv = [spec["module"]] + list(spec.get("args", []))
    code = 0
    try:
        runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - like an interpreter's uncaught exception
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# `-c`, not `-m amdkv.verify.fork_server`: with -m, importing the amdkv.verify package (which
# imports this module through pool.py) and then running this module as __main__ loads it twice,
# and runpy warns about it on every server start.
_SERVER_ENTRY = ("import sys; from amdkv.verify.fork_server import serve; "
                 "sys.exit(serve(int(sys.argv[1]), int(sys.argv[2])))")


def serve(ctrl_fd: int, parent_pid: int) -> int:
    """The server's loop (started by ForkServer as `python -c "<_SERVER_ENTRY>" FD PARENT_PID`).

    The parent names itself: read here with getppid() after the slow start-up, a parent SIGKILLed
    in the meantime read as pid 1 (this server already re-parented), and its temp folders were then
    never removed (1 of ~25 loaded runs of the killed-parent test, session 19)."""
    import amdkv.verify.worker_preload  # noqa: F401  - the point of the server

    sock = socket.socket(fileno=ctrl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up fd is written
    _send(sock, {"ready": True})
    children = _Children(parent_pid=parent_pid)
    try:
        return _serve_loop(sock, ctrl_fd, wake_r, wake_w, children)
    finally:
        children.end_all()


# How long a server whose parent's end closed without a goodbye waits to be re-parented (the sign
# that the parent is dead) before it leaves the parent's unannounced temp folders alone.
PARENT_EXIT_WAIT_S = 5.0


class _Children:
    """The server's children (running) and the folders that die with them (spec "owned_dir")."""

    def __init__(self, parent_pid: int | None = None) -> None:
        self.running: set[int] = set()
        self.owned: dict[int, str] = {}
        self.extra: list[str] = []  # the parent's own folders (ForkServer.own)
        self.parent_pid = parent_pid  # whose temp folders (temp_folders) go once it is dead
        self.parent_said_bye = False  # the parent closed on purpose (ForkServer.close): it is alive

    def started(self, pid: int, owned_dir: str | None) -> None:
        self.running.add(pid)
        # the parent removes a finished worker's folder within moments: forget those already gone
        for old in [p for p, d in self.owned.items() if p not in self.running and not os.path.isdir(d)]:
            del self.owned[old]
        if owned_dir:
            self.owned[pid] = owned_dir

    def exited(self, pids: list[int]) -> None:
        self.running.difference_update(pids)

    def end_all(self) -> None:
        """The parent is gone (it closed its end, or died: a SIGKILLed `amdkv eval` closes it too):
        kill the process group of every child still running (an exited child's pid is never
        signalled: it may be another process's by now) and remove the folders the parent would
        have removed, so that a killed run leaves no worker and no temp folder behind."""
        import shutil

        for pid in self.running:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        for folder in [*self.owned.values(), *self.extra]:
            shutil.rmtree(folder, ignore_errors=True)
        # and every folder the parent made that nobody told us about yet (made just before it was
        # killed): only when it is really dead, i.e. this server has been re-parented (a live parent
        # with several servers may still use folders named by its pid)
        if self.parent_pid is not None and self._parent_dead():
            from amdkv.verify.temp_folders import remove_folders_of

            remove_folders_of(self.parent_pid)

    def _parent_dead(self) -> bool:
        """Whether the parent is dead, i.e. this server has been re-parented. A SIGKILLed parent's
        socket closes (EOF here) a moment before the kernel re-parents its children: without the
        parent's goodbye, wait for that, at most PARENT_EXIT_WAIT_S. Read at once, the folder made
        just before the kill stayed in 4 of 15 runs of its test on the 2-core dev machine under 3
        busy loops (session 19); 0 of 15 with the wait."""
        deadline = time.monotonic() + (0.0 if self.parent_said_bye else PARENT_EXIT_WAIT_S)
        while os.getppid() == self.parent_pid:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True


def _serve_loop(sock: socket.socket, ctrl_fd: int, wake_r: int, wake_w: int, children: _Children) -> int:
    server_pid = os.getpid()
    while True:
        readable, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            children.exited(_reap(sock))
        if sock not in readable:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
        except OSError:
            return 0
        if not msg:
            return 0  # the parent closed its end
        req = json.loads(msg)
        if "own" in req:  # a folder of the parent's to remove if the parent dies (ForkServer.own)
            children.extra.append(req["own"])
            continue
        if "bye" in req:  # the parent is closing on purpose (ForkServer.close): its end follows
            children.parent_said_bye = True
            continue
        spec = req.get("spec") or {}
        want_fds = 1 if spec.get("kind") == "worker" else 0
        if len(fds) != want_fds or spec.get("kind") not in ("worker", "module"):
            for fd in fds:
                os.close(fd)
            _send(sock, {"id": req.get("id"), "error": f"bad request: kind {spec.get('kind')!r} with {len(fds)} fd(s)"})
            continue
        pid = os.fork()
        if pid == 0:  # the child: drop everything that leads back to the server first
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (ctrl_fd, wake_r, wake_w):
                os.close(fd)
            try:
                _child_main(spec, fds, server_pid)
            finally:
                os._exit(70)  # _child_main exits itself; reaching here means it raised
        for fd in fds:
            os.close(fd)
        children.started(pid, spec.get("owned_dir"))
        _send(sock, {"id": req["id"], "pid": pid})
        children.exited(_reap(sock))


# ------------------------------------------------------------------------------------------ parent
class ForkServer:
    """The parent's handle on its fork server: `spawn()` a worker, `wait()` for its exit code.

    One reader thread takes the server's messages (pids for requests, exit codes); callers wait on
    a condition. If the server dies, every waiting spawn fails with InfrastructureError and the
    next `shared()` call starts a new server.
    """

    def __init__(self, env: dict[str, str] | None = None) -> None:
        parent_sock, server_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = parent_sock
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._alive = True
        self._send_lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER_ENTRY, str(server_sock.fileno()), str(os.getpid())],
            pass_fds=[server_sock.fileno()], env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        server_sock.close()
        ready, _, _ = select.select([self._sock], [], [], START_TIMEOUT_S)
        first = self._sock.recv(MAX_MESSAGE) if ready else b""
        if not first or not json.loads(first).get("ready"):
            self.close()
            raise InfrastructureError("the worker fork server did not start",
                                      hint="check that torch and triton import in this Python; "
                                           "AMDKV_SPARE_START=exec avoids the fork server")
        self._reader = threading.Thread(target=self._read_loop, daemon=True, name="amdkv-fork-server")
        self._reader.start()

    def _read_loop(self) -> None:
        while True:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except OSError:
                data = b""
            with self._cond:
                if not data:
                    self._alive = False
                    self._cond.notify_all()
                    return
                msg = json.loads(data)
                if "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                else:
                    self._replies[msg["id"]] = msg
                self._cond.notify_all()

    @property
    def alive(self) -> bool:
        return self._alive and self.proc.poll() is None

    def spawn(self, spec: dict[str, Any], channel_fd: int | None = None, timeout: float = 60.0) -> int:
        """Fork a child for `spec` (see _child_main); returns its pid. A worker gets `channel_fd`."""
        with self._cond:
            self._next_id += 1
            req_id = self._next_id
        try:
            with self._send_lock:
                _send(self._sock, {"id": req_id, "spec": spec}, [channel_fd] if channel_fd is not None else None)
        except OSError as exc:
            self._alive = False
            raise InfrastructureError(f"the worker fork server is gone: {exc}", hint="retry") from exc
        deadline = time.monotonic() + timeout
        with self._cond:
            while req_id not in self._replies:
                left = deadline - time.monotonic()
                if not self._alive or left <= 0:
                    raise InfrastructureError("the worker fork server did not fork a worker"
                                              + ("" if self._alive else " (it exited)"), hint="retry")
                self._cond.wait(left)
            reply = self._replies.pop(req_id)
        if "error" in reply:
            raise InfrastructureError(f"the worker fork server refused: {reply['error']}")
        return int(reply["pid"])

    def own(self, folder: str) -> None:
        """Have the server remove `folder` when this process dies without removing it itself (a
        SIGKILLed run): the verifier's scratch of candidate texts. Best effort."""
        with contextlib.suppress(OSError), self._send_lock:
            _send(self._sock, {"own": folder})

    def wait(self, pid: int, timeout: float | None) -> int | None:
        """The worker's exit code (negative: killed by that signal), or None at timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while pid not in self._exits:
                if not self._alive:
                    return None
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._exits[pid]

    def forget(self, pid: int) -> None:
        with self._cond:
            self._exits.pop(pid, None)

    def close(self) -> None:
        self._alive = False
        with contextlib.suppress(OSError), self._send_lock:  # a live parent: no wait for re-parenting
            _send(self._sock, {"bye": True})
        with contextlib.suppress(OSError):  # already closed: the server sees EOF either way and exits
            self._sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# Settings that libraries read once at import time, so a forked worker cannot change them: the
# server is started with the worker's values. TRITON_INTERPRET decides at import whether
# triton.language's own @jit functions are interpreted.
IMPORT_TIME_ENV = ("TRITON_INTERPRET", "OMP_WAIT_POLICY")  # the latter read by libgomp when torch loads

_SHARED: dict[tuple[tuple[str, str], ...], ForkServer] = {}
_SHARED_LOCK = threading.Lock()


def shared(worker_env: dict[str, str]) -> ForkServer:
    """This process's fork server for workers whose import-time settings (IMPORT_TIME_ENV) are
    those of `worker_env`; started on first use with this process's environment plus them."""
    key = tuple((k, worker_env[k]) for k in IMPORT_TIME_ENV if k in worker_env)
    with _SHARED_LOCK:
        server = _SHARED.get(key)
        if server is None or not server.alive:
            from amdkv.process import with_package_on_path

            env = with_package_on_path({k: v for k, v in os.environ.items() if k not in IMPORT_TIME_ENV})
            env.update(dict(key))
            server = _SHARED[key] = ForkServer(env)
        return server


def start_method(choice: str = "auto") -> str:
    """'fork' or 'exec' for the verifier's Python workers, from the config's `spare_start`
    (auto|fork|exec; env AMDKV_SPARE_START through VerifierConfig.from_env).

    auto is fork on every platform. Measured (docs/verifier.md, docs/gpu.md): on the CPU
    interpreter it more than doubled verified candidates per minute; on an H200 a forked spare
    uses 5.5 host CPU-seconds per candidate where an exec'd one used 11.4, with the same statuses
    (every throughput candidate ok, the adversarial set 53/53). A forked worker initialises its GPU
    itself, which is sound because the server never does. exec stays available
    (AMDKV_SPARE_START=exec) for a Python whose fork misbehaves; a spare that cannot be forked
    falls back to exec anyway."""
    choice = (choice or "auto").strip().lower()
    if choice not in ("auto", "fork", "exec"):
        raise InfrastructureError(f"spare_start={choice!r} is not one of auto, fork, exec",
                                  hint="unset AMDKV_SPARE_START, or set it to fork or exec")
    return "exec" if choice == "exec" else "fork"


def kill_forked(pid: int, *, exited: bool) -> None:
    """SIGKILL a forked child's process group (it ran setsid), and the child itself by pid while it
    has not exited (it may be killed before its setsid). An exited child's pid is not signalled:
    it may belong to another process by now."""
    targets = [os.killpg] + ([] if exited else [os.kill])
    for kill in targets:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # group gone, or pid no longer ours
            kill(pid, signal.SIGKILL)


def run_module(module: str, args: Sequence[str], *, timeout: float, env: dict[str, str], cwd: str,
               host_memory_bytes: int | None = None, sandbox: Any = None) -> Any:
    """`python -m MODULE ARGS` in a child forked from the fork server, like sandbox.run_process:
    own process group killed at the end, host-memory cap, stdout/stderr captured (through files
    in `cwd`), confined by `sandbox` (an os_sandbox.SandboxPlan, or None). Returns a
    sandbox.ProcessResult."""
    import tempfile

    from amdkv.process import ProcessResult

    start = time.monotonic()
    server = shared(env)
    fd_out, out_path = tempfile.mkstemp(prefix="amdkv-fork-out-", dir=cwd)
    fd_err, err_path = tempfile.mkstemp(prefix="amdkv-fork-err-", dir=cwd)
    os.close(fd_out)
    os.close(fd_err)
    try:
        pid = server.spawn({"kind": "module", "module": module, "args": list(args), "env": env, "cwd": cwd,
                            "stdout_path": out_path, "stderr_path": err_path,
                            "mem_cap_bytes": host_memory_bytes,
                            "sandbox": json.loads(sandbox.to_json()) if sandbox is not None else None})
        code = server.wait(pid, timeout)
        timed_out = code is None
        kill_forked(pid, exited=not timed_out)  # grandchildren die with the group
        if timed_out:
            code = server.wait(pid, 10.0)
        server.forget(pid)
        with open(out_path, errors="replace") as fo, open(err_path, errors="replace") as fe:
            return ProcessResult(code, fo.read(), fe.read(), timed_out, time.monotonic() - start)
    finally:
        for path in (out_path, err_path):
            with contextlib.suppress(OSError):  # the caller's temp dir may be gone already
                os.unlink(path)
