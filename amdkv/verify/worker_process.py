"""How one verifier worker process is started and talked to: exec'd (`python -m
amdkv.verify.worker`, READY/job/DONE over stdin/stdout) or forked by the fork server
(fork_server.py, the same messages over a socket). pool.Spare drives either through the same five
calls: send_job, wait_for, stdout_text, wait, kill (plus close_idle for a spare never used)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import threading
import time
from typing import Any

from amdkv.verify.sandbox import kill_group, memory_cap_preexec, python_module_argv

STDOUT_KEEP_BYTES = 1 << 20  # a candidate that floods stdout/stderr is judged on what it printed last
STDERR_KEEP_BYTES = 1 << 20


FATAL_MARK = "Fatal Python error"  # how faulthandler (enabled in every worker) begins its crash report


def stderr_excerpt(text: str, keep: int) -> str:
    """What of a worker's stderr a message keeps: from faulthandler's crash report on, when there
    is one (the crashing thread's stack comes first, the tail would keep only other threads and
    the module list), else the last `keep` characters."""
    at = text.rfind(FATAL_MARK)
    return text[at:at + keep] if at >= 0 else text[-keep:]


def tail_bytes(path: str, keep: int) -> bytes:
    """The last `keep` bytes of a file (empty when it is missing)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - keep))
            return fh.read()
    except OSError:
        return b""


class ExecWorkerProcess:
    """A worker started as `python -m amdkv.verify.worker`: it pays for its interpreter and for
    importing torch and Triton itself, and shares nothing with any other process."""

    def __init__(self, env: dict[str, str], workdir: str, stderr_path: str, mem_cap_bytes: int | None,
                 argv: list[str] | None = None, sandbox: Any = None) -> None:
        # stderr goes to a file, not a pipe: after DONE the parent reads it without waiting for
        # the process to exit (nothing can block on a full pipe either).
        with open(stderr_path, "wb") as err_fh:
            self.popen = subprocess.Popen(
                argv or python_module_argv("amdkv.verify.worker", (), sandbox), env=env, cwd=workdir,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_fh,
                start_new_session=True, preexec_fn=memory_cap_preexec(mem_cap_bytes))
        self.pid = self.popen.pid
        self._out = b""

    def send_job(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker died: EOF comes next, its return code says how
            self.popen.stdin.write(data + b"\n")
            self.popen.stdin.close()

    def wait_for(self, marker: str, deadline: float) -> str:
        """'seen', 'eof' or 'timeout'. stdout read on the way is kept (the last STDOUT_KEEP_BYTES);
        the marker counts only at the start of a line."""
        fd = self.popen.stdout.fileno()
        mark = marker.encode()
        while True:
            at = self._out.find(mark)
            if at >= 0 and (at == 0 or self._out[at - 1:at] == b"\n"):
                self._out = self._out[:at] + self._out[at + len(mark):]
                return "seen"
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return "eof"
            self._out += chunk
            if len(self._out) > 2 * STDOUT_KEEP_BYTES:
                self._out = self._out[-STDOUT_KEEP_BYTES:]

    def stdout_text(self) -> str:
        return self._out.decode(errors="replace")

    def wait(self, timeout: float | None) -> int | None:
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        kill_group(self.popen)

    def close_idle(self) -> None:
        """Tell a spare that never got a job to exit."""
        if self.popen.stdin and not self.popen.stdin.closed:
            self.popen.stdin.close()


class ForkedWorkerProcess:
    """A worker forked by this process's fork server (fork_server.py), which imported torch and
    Triton once: a spare costs a fork instead of an interpreter start and those imports. It talks
    to the parent over a socket (READY, the job, DONE) and writes stdout/stderr to files."""

    def __init__(self, env: dict[str, str], workdir: str, stderr_path: str, mem_cap_bytes: int | None,
                 sandbox: Any = None, owned_dir: str | None = None) -> None:
        from multiprocessing.connection import Connection

        from amdkv.verify import fork_server

        self.server = fork_server.shared(env)
        self.stdout_path = os.path.join(workdir, "worker_stdout.txt")
        ours, theirs = socket.socketpair()
        try:
            self.pid = self.server.spawn({
                "kind": "worker", "env": env, "cwd": workdir, "stdout_path": self.stdout_path,
                "stderr_path": stderr_path, "mem_cap_bytes": mem_cap_bytes, "owned_dir": owned_dir,
                "sandbox": json.loads(sandbox.to_json()) if sandbox is not None else None},
                channel_fd=theirs.fileno())
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self._code: int | None = None
        self._wait_lock = threading.Lock()

    def send_job(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the worker died: EOF comes next
            self.conn.send_bytes(data)

    def wait_for(self, marker: str, deadline: float) -> str:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            try:
                if not self.conn.poll(left):
                    continue
                msg = self.conn.recv_bytes().decode(errors="replace")
            except (EOFError, OSError):
                return "eof"
            if msg == marker:
                return "seen"

    def stdout_text(self) -> str:
        return tail_bytes(self.stdout_path, STDOUT_KEEP_BYTES).decode(errors="replace")

    def wait(self, timeout: float | None) -> int | None:
        # One thread at a time asks the server (the reaper and cleanup may both wait): the exit code
        # is handed out once, then kept here.
        if not self._wait_lock.acquire(timeout=-1 if timeout is None else timeout):
            return self._code
        try:
            if self._code is None:
                code = self.server.wait(self.pid, timeout)
                if code is not None:
                    self._code = code
                    self.server.forget(self.pid)
                    with contextlib.suppress(OSError):  # its channel may be closed already (close_idle)
                        self.conn.close()
            return self._code
        finally:
            self._wait_lock.release()

    def kill(self) -> None:
        from amdkv.verify.fork_server import kill_forked

        kill_forked(self.pid, exited=self._code is not None)

    def close_idle(self) -> None:
        """Tell a spare that never got a job to exit (it sees EOF on its channel)."""
        with contextlib.suppress(OSError):  # already closed: the spare has seen EOF or exited
            self.conn.close()
