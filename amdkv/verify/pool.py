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
from amdkv.verify.timing import timing_lock_path
from amdkv.verify.worker import DONE_LINE

READY_TIMEOUT_S = 120.0
STDOUT_KEEP_BYTES = 1 << 20  # a candidate that floods stdout/stderr is judged on what it printed last
STDERR_KEEP_BYTES = 1 << 20


def _repo_root_for_pythonpath() -> str:
    """The folder that holds the `amdkv` package, so workers import the same code."""
    import amdkv

    return str(Path(amdkv.__file__).resolve().parent.parent)


_LOCK_KEYS: dict[str, str] = {}


def gpu_lock_key(device: str) -> str:
    """A name for the physical GPU behind `device` (cuda:N): its UUID where torch reports one, so
    that processes with different CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES share one lock per GPU;
    otherwise the device string."""
    if device in _LOCK_KEYS:
        return _LOCK_KEYS[device]
    key = device.replace(":", "")
    try:
        import torch

        props = torch.cuda.get_device_properties(torch.device(device))
        uuid = getattr(props, "uuid", None)
        if uuid:
            key = f"gpu-{uuid}"
    except Exception:  # noqa: BLE001 - the index-based name is still a correct lock on one machine
        pass
    _LOCK_KEYS[device] = key
    return key


def default_gpu_mem_fraction(concurrent: int) -> float:
    """Share of a GPU's memory one candidate may use when `concurrent` candidates share the GPU
    (15% kept for the reference worker, the CUDA contexts and the cache-flush buffers)."""
    return round(max(0.05, 0.85 / max(1, concurrent)), 4)


class Spare:
    """One started worker process waiting (or about to wait) for its single job."""

    def __init__(self, platform: PlatformInfo, mem_cap_bytes: int | None, base_tmp: str | None = None,
                 gpu_mem_fraction: float | None = None, extra_env: dict[str, str] | None = None) -> None:
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
            # One lock file per physical GPU: timed sections of concurrent workers never overlap.
            env["AMDKV_TIMING_LOCK"] = timing_lock_path(gpu_lock_key(platform.device))
            if gpu_mem_fraction:
                # Per-candidate GPU memory cap, applied by the worker to candidate jobs only
                # (torch.cuda.set_per_process_memory_fraction); exceeding it is runtime_error/oom.
                env["AMDKV_GPU_MEM_FRACTION"] = f"{gpu_mem_fraction:.4f}"
        env.update(extra_env or {})
        self.started = time.monotonic()
        # stderr goes to a file, not a pipe: after DONE the parent reads it without waiting for
        # the process to exit (nothing can block on a full pipe either).
        self.stderr_path = os.path.join(self.workdir, "worker_stderr.txt")
        with open(self.stderr_path, "wb") as err_fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "amdkv.verify.worker"], env=env, cwd=self.workdir,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_fh,
                start_new_session=True,
                preexec_fn=memory_cap_preexec(mem_cap_bytes if platform.interpreter else None),
            )
        self._ready = False
        self.ready_wait_s = 0.0  # how long a job waited for this spare's start-up (0 when it was ready)

    def _stderr_text(self) -> str:
        try:
            with open(self.stderr_path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self.stderr_path) - STDERR_KEEP_BYTES))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until the worker printed READY (it has imported torch/triton)."""
        if self._ready:
            return
        t_wait = time.monotonic()
        deadline = t_wait + timeout
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
                    self.proc.wait()
                    err = self._stderr_text()
                    raise InfrastructureError(f"verifier worker exited during start-up: {err[-1500:]}",
                                              hint="check that torch and triton import in this Python")
                buf += chunk
        if not buf.startswith(b"READY"):
            self.kill()
            raise InfrastructureError(f"verifier worker said {buf[:200]!r} instead of READY")
        self._ready = True
        self.ready_wait_s = time.monotonic() - t_wait

    def run(self, job: dict[str, Any], timeout: float) -> ProcessResult:
        """Send the one job; return when the worker says DONE (its report is complete), when it
        exits, or at `timeout`. The process group is killed in every case. After DONE the parent
        does not wait for the exit: tearing down a GPU context takes time that is neither the
        candidate's nor the verifier's, so a background thread reaps the process."""
        self.wait_ready()
        start = time.monotonic()
        deadline = start + timeout
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the worker died: EOF below, its return code says how
        out, done, timed_out = self._read_until_done(deadline)
        kill_group(self.proc)
        if done:
            returncode: int | None = 0
            threading.Thread(target=self.proc.wait, daemon=True, name="amdkv-reap").start()
        else:
            try:
                returncode = self.proc.wait(timeout=max(1.0, deadline - time.monotonic()) if not timed_out else 10.0)
            except subprocess.TimeoutExpired:
                returncode = None
        return ProcessResult(returncode, out.decode(errors="replace"), self._stderr_text(), timed_out,
                             time.monotonic() - start)

    def _read_until_done(self, deadline: float) -> tuple[bytes, bool, bool]:
        """(stdout without the DONE line, DONE seen, timed out). Keeps the last STDOUT_KEEP_BYTES."""
        fd = self.proc.stdout.fileno()
        marker = DONE_LINE.encode()
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return buf, False, True
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return buf, False, False  # EOF: the worker exited (or closed its stdout)
            buf += chunk
            at = buf.find(marker)
            if at >= 0 and (at == 0 or buf[at - 1:at] == b"\n"):
                return buf[:at] + buf[at + len(marker):], True, False
            if len(buf) > 2 * STDOUT_KEEP_BYTES:
                buf = buf[-STDOUT_KEEP_BYTES:]

    def kill(self) -> None:
        kill_group(self.proc)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:  # SIGKILLed group: the kernel reaps it; don't block the pool
            pass

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)


class SparePool:
    """Keeps `size` spares started for one platform/device; `take()` hands one out and starts
    its replacement in the background."""

    def __init__(self, platform: PlatformInfo, size: int = 1, mem_cap_bytes: int | None = None,
                 gpu_mem_fraction: float | None = None) -> None:
        self.platform = platform
        self.size = max(0, size)
        self.mem_cap_bytes = mem_cap_bytes
        # None: the default share for `size` concurrent candidates; 0: no cap.
        if gpu_mem_fraction is None and not platform.interpreter:
            env_frac = os.environ.get("AMDKV_GPU_MEM_FRACTION")
            gpu_mem_fraction = float(env_frac) if env_frac else default_gpu_mem_fraction(self.size)
        self.gpu_mem_fraction = gpu_mem_fraction or None
        self._spares: list[Spare] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(self.size):
            self._spares.append(self._start())

    def _start(self) -> Spare:
        return Spare(self.platform, self.mem_cap_bytes, gpu_mem_fraction=self.gpu_mem_fraction)

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
