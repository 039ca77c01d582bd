"""Warm spare worker processes: started ahead, used once, never reused.

Speed comes from having torch imported and the device initialised before a candidate arrives,
not from reusing a process (DESIGN.md section 2). Each spare has its own process group, temp
dir, Triton cache dir and torch-extensions dir, and (on CPU) an address-space cap.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from amdkv.errors import InfrastructureError
from amdkv.verify.platform import PlatformInfo
from amdkv.verify.sandbox import ProcessResult, kill_group, memory_cap_preexec

READY_TIMEOUT_S = 120.0


def _repo_root_for_pythonpath() -> str:
    """The folder that holds the `amdkv` package, so workers import the same code."""
    import amdkv

    return str(Path(amdkv.__file__).resolve().parent.parent)


class Spare:
    """One started worker process waiting (or about to wait) for its single job."""

    def __init__(self, platform: PlatformInfo, mem_cap_bytes: int | None, base_tmp: str | None = None) -> None:
        self.platform = platform
        self.workdir = tempfile.mkdtemp(prefix="amdkv-worker-", dir=base_tmp)
        env = dict(os.environ)
        env.update({
            "AMDKV_WORKER_DEVICE": platform.device,
            "TRITON_CACHE_DIR": os.path.join(self.workdir, "triton_cache"),
            "TORCH_EXTENSIONS_DIR": os.path.join(self.workdir, "torch_extensions"),
            "TMPDIR": self.workdir,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join([_repo_root_for_pythonpath()] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]),
        })
        if platform.interpreter:
            env["TRITON_INTERPRET"] = "1"
            env.setdefault("OMP_NUM_THREADS", "1")  # workers run side by side on few cores
        else:
            env.pop("TRITON_INTERPRET", None)
            # One lock file per GPU: timed sections of concurrent workers never overlap.
            env["AMDKV_TIMING_LOCK"] = os.path.join(tempfile.gettempdir(),
                                                    f"amdkv-timing-{platform.device.replace(':', '')}.lock")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "amdkv.verify.worker"], env=env, cwd=self.workdir,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=memory_cap_preexec(mem_cap_bytes if platform.interpreter else None),
        )
        self._ready = False

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until the worker printed READY (it has imported torch/triton)."""
        if self._ready:
            return
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise InfrastructureError(f"verifier worker did not start within {timeout:.0f} s",
                                          hint="the machine may be overloaded; retry")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    err = self.proc.stderr.read() if self.proc.stderr else ""
                    raise InfrastructureError(f"verifier worker exited during start-up: {err[-1500:]}",
                                              hint="check that torch and triton import in this Python")
                buf += chunk
        if not buf.startswith(b"READY"):
            self.kill()
            raise InfrastructureError(f"verifier worker said {buf[:200]!r} instead of READY")
        self._ready = True

    def run(self, job: dict[str, Any], timeout: float) -> ProcessResult:
        """Send the one job and wait for the process to finish (or kill its group at timeout)."""
        self.wait_ready()
        start = time.monotonic()
        try:
            out, err = self.proc.communicate((json.dumps(job) + "\n").encode(), timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            out, err = self.proc.communicate()
            timed_out = True
        finally:
            kill_group(self.proc)
        return ProcessResult(self.proc.returncode, (out or b"").decode(errors="replace"),
                             (err or b"").decode(errors="replace"), timed_out, time.monotonic() - start)

    def kill(self) -> None:
        kill_group(self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


class SparePool:
    """Keeps `size` spares started for one platform/device; `take()` hands one out and starts
    its replacement in the background."""

    def __init__(self, platform: PlatformInfo, size: int = 1, mem_cap_bytes: int | None = None) -> None:
        self.platform = platform
        self.size = max(0, size)
        self.mem_cap_bytes = mem_cap_bytes
        self._spares: list[Spare] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(self.size):
            self._spares.append(self._start())

    def _start(self) -> Spare:
        return Spare(self.platform, self.mem_cap_bytes)

    def take(self) -> Spare:
        with self._lock:
            if self._closed:
                raise InfrastructureError("the worker pool is closed")
            spare = self._spares.pop(0) if self._spares else self._start()
            while len(self._spares) < self.size:
                self._spares.append(self._start())
            return spare

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for s in self._spares:
                s.proc.stdin.close() if s.proc.stdin else None
                s.cleanup()
            self._spares.clear()

    def __enter__(self) -> "SparePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
