"""Warm spare worker processes: started ahead, used once, never reused.

Speed comes from having torch imported and the device initialised before a candidate arrives,
not from reusing a process (DESIGN.md section 2). Each spare has its own process group, temp
dir, Triton cache dir and torch-extensions dir, and a host-memory cap. A spare is
exec'd or forked from the fork server (worker_process.py, fork_server.py; config `spare_start`).
Every setting comes from the run's `VerifierConfig`; a worker receives its part as one JSON
environment variable (`AMDKV_WORKER_SETTINGS`: the `WorkerSettings` message of worker_protocol.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from amdkv.config import VerifierConfig
from amdkv.verify.gpu_memory import default_gpu_mem_fraction
from amdkv.errors import InfrastructureError
from amdkv.verify.fork_server import start_method
from amdkv.verify.host_oom import killed_by_host_oom, oom_kills
from amdkv.verify.platform import PlatformInfo, worker_gpu_env
from amdkv.verify.sandbox import ProcessResult, with_package_on_path
from amdkv.verify.temp_folders import make_temp_folder
from amdkv.verify.timing import timing_lock_path
from amdkv.verify.worker import DONE_LINE, READY_LINE
from amdkv.verify.worker_protocol import WORKER_SETTINGS_ENV, WorkerJob, WorkerSettings
from amdkv.verify.worker_process import (STDERR_KEEP_BYTES, ExecWorkerProcess, ForkedWorkerProcess,
                                         tail_bytes)

READY_TIMEOUT_S = 120.0
_FORK_FALLBACK_SAID = False


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


def worker_env(platform: PlatformInfo, workdir: str, environ: Mapping[str, str],
               gpu_mem_fraction: float | None, config: VerifierConfig | None = None) -> tuple[dict[str, str], str]:
    """The environment of a worker for `platform` working in `workdir`, and its device name as the
    worker sees it. One function, so what every worker gets (its one GPU, its private caches, the
    timing lock, the memory cap, one CUDA work queue, its settings) can be read and tested in one
    place. The worker's settings travel as one JSON variable (AMDKV_WORKER_SETTINGS, a
    WorkerSettings message: written here only)."""
    env = with_package_on_path(environ)
    gpu_env, device = worker_gpu_env(platform, env)  # the worker sees only its own GPU
    env.update(gpu_env)
    timing_lock: str | None = None
    worker_mem_fraction: float | None = None
    env.update({
        "TRITON_CACHE_DIR": os.path.join(workdir, "triton_cache"),
        "TORCH_EXTENSIONS_DIR": os.path.join(workdir, "torch_extensions"),
        "TMPDIR": workdir,
        # A process whose real and effective uids differ (a sandboxed worker run as root, see
        # make_worker_dirs) execs its children in glibc's secure mode, which deletes TMPDIR from
        # their environment: gcc then looked for TMP and TEMP, found neither, and used /tmp.
        "TMP": workdir,
        "TEMP": workdir,
        # the worker's home is its scratch folder: libraries that write under ~ (Triton's ~/.triton,
        # CUDA's ~/.nv/ComputeCache) write there, the only place the OS sandbox lets them write
        "HOME": workdir,
        "CUDA_CACHE_PATH": os.path.join(workdir, "cuda_cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    if platform.interpreter:
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("OMP_NUM_THREADS", "1")  # workers run side by side on few cores
    else:
        env.pop("TRITON_INTERPRET", None)
        # OpenMP threads that finished a parallel region sleep at once instead of spinning: a GPU
        # worker's CPU work is copies between long waits for the GPU, and torch's pool has a thread
        # per core, each spinning after every copy (measured here with 2 threads: 2.82 -> 2.4
        # CPU-s for the same copies and the same wall time; the H200 host has 16 per worker).
        # libgomp reads it when torch is imported, so the fork server is keyed by it
        # (fork_server.IMPORT_TIME_ENV). A value the user set is kept. Threads only: no verdict changes.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        # One lock file per physical GPU: timed sections of concurrent workers never overlap.
        timing_lock = timing_lock_path(gpu_lock_key(platform.device))
        if platform.name == "cuda":
            # One hardware work queue per worker context instead of CUDA's 8: context creation
            # then does a fraction of the driver work, and that work is serialised host-wide,
            # across GPUs. Measured on 2 x H200 (docs/gpu.md, Throughput): a spare's context took
            # 6.4 s with 24 spares starting on two GPUs, 0.3 s with this; two-GPU scaling went
            # from 1.38x to 1.86x. The cost: streams share one queue, so a candidate that
            # overlaps kernels on several streams is timed without that overlap. A value the
            # user set is kept.
            env.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")
        if gpu_mem_fraction:
            # Per-candidate GPU memory cap, applied by the worker to candidate jobs only
            # (torch.cuda.set_per_process_memory_fraction); exceeding it is runtime_error/oom.
            worker_mem_fraction = round(gpu_mem_fraction, 4)
    settings = WorkerSettings(device=device, visible_gpus=1 if gpu_env else None,  # checked once its GPU is up
                              timing_lock=timing_lock, gpu_mem_fraction=worker_mem_fraction,
                              **(config or VerifierConfig()).worker_settings())
    env[WORKER_SETTINGS_ENV] = settings.to_json()
    return env, device


JOB_LABEL_FILE = "amdkv_job.txt"  # in a worker's cwd: what job it runs (Spare.run's `label`)


def make_worker_dirs(base_tmp: str | None = None) -> tuple[str, str, str]:
    """A worker's folder, its `scratch/` (cwd, TMPDIR, HOME: writable) and `in/` (read-only).

    As root, the OS sandbox gives the worker's real uid away (RLIMIT_NPROC exempts a real root)
    and keeps uid 0 only as the effective one. access() asks with the real uid, so gcc (Triton's
    launcher build) found its temp folder unusable and fell back to /tmp, which the sandbox
    refuses: every Triton candidate was a compile_error on the H200 (session 7). Group rights for
    the real gid (root's group, which only root holds) make access() agree with what the worker
    may really do. (See worker_env for the other half: TMP/TEMP.)"""
    root = make_temp_folder("worker", base_tmp)  # named by this pid: see temp_folders
    workdir, in_dir = os.path.join(root, "scratch"), os.path.join(root, "in")
    os.mkdir(workdir, 0o700)
    os.mkdir(in_dir, 0o700)
    if os.geteuid() == 0:
        os.chmod(root, 0o750)
        os.chmod(in_dir, 0o750)
        os.chmod(workdir, 0o770)
    return root, workdir, in_dir


def unreachable_for_root_worker(folder: str) -> str | None:
    """Why a worker started by root under the OS sandbox could not use `folder` as its temp folder,
    or None. Such a worker's real uid is `nobody` (os_sandbox.NOBODY_UID) with root's groups, and
    access() asks with those real ids: gcc checks its temp folder that way and, refused, falls back
    to /tmp, which the sandbox forbids, and aborts, so every Triton candidate became a compile_error
    (the H200's fault suite, session 8, whose folders lay under a 0700 mkdtemp). Every folder above
    `folder` must be searchable by those ids, and `folder` itself readable, writable, searchable."""
    from amdkv.verify.os_sandbox import NOBODY_UID

    groups = {os.getgid(), *os.getgroups()}
    path = os.path.abspath(folder)
    chain = [path]
    while os.path.dirname(chain[-1]) != chain[-1]:
        chain.append(os.path.dirname(chain[-1]))
    for here in reversed(chain):
        st = os.stat(here)
        need = 0o7 if here == path else 0o1
        bits = (st.st_mode >> 6) & 0o7 if st.st_uid == NOBODY_UID else \
            (st.st_mode >> 3) & 0o7 if st.st_gid in groups else st.st_mode & 0o7
        if bits & need != need:
            return (f"{here} (mode {st.st_mode & 0o7777:04o}, owner {st.st_uid}:{st.st_gid}) is closed to a sandboxed "
                    f"worker's real ids (uid {NOBODY_UID}, groups {sorted(groups)}), so gcc inside the worker cannot "
                    f"use its temp folder {folder}")
    return None


def cpu_seconds_limit(timeout: float) -> int:
    """RLIMIT_CPU of a worker: a backstop for a spinning process its parent can no longer kill (a
    killed run), far above what a worker uses in its wall-clock timeout (10 busy cores)."""
    return int(10 * timeout + 600)


def worker_sandbox_plan(platform: PlatformInfo, config: VerifierConfig, workdir: str, readable: Sequence[str] = (),
                        writable: Sequence[str] = ()) -> Any:
    """The OS sandbox of one worker (os_sandbox.SandboxPlan; None when config.sandbox is off): it
    writes only in `workdir` (+ `writable`, + its GPU's timing lock file), reads the system, Python
    and `readable`, sees GPU device files only on GPU platforms."""
    from amdkv.verify import os_sandbox

    extra = list(writable)
    if not platform.interpreter:
        lock = timing_lock_path(gpu_lock_key(platform.device))
        Path(lock).touch()  # a Landlock rule names an existing file
        extra.append(lock)
    return os_sandbox.plan(
        config.sandbox, writable=[workdir, *extra], readable=readable, gpu=not platform.interpreter,
        nproc=config.sandbox_nproc, file_size_bytes=int(config.sandbox_file_size_gib * 2**30),
        cpu_seconds=cpu_seconds_limit(config.timeout_for(platform.interpreter)))


def host_memory_cap_bytes(platform: PlatformInfo, config: VerifierConfig) -> int:
    """A worker's host-memory cap (its data segment, process.cap_host_memory): AMDKV_MEM_CAP_GIB where
    Triton interprets, AMDKV_GPU_HOST_MEM_GIB on GPU platforms. One rule for the cap and for the note a
    host out-of-memory error gets (judging.memory_cap_note). Before session 28 GPU workers got theirs
    through the OS sandbox, so none with the sandbox off."""
    return int((config.mem_cap_gib if platform.interpreter else config.gpu_host_mem_gib) * 2**30)


def seeds_triton_stub(platform: PlatformInfo, config: VerifierConfig, extra_env: dict[str, str] | None) -> bool:
    """Whether a spare gets the parent's prebuilt Triton driver helper: on NVIDIA, when asked, and only
    into its own Triton cache. A reference worker's cache is shared with the running ones (`extra_env`
    sets it): seeding there rewrote a library they had loaded, and they died (triton_stubs.py)."""
    return config.seed_triton_stubs and _own_triton_cache(platform, extra_env)


def seeds_triton_launchers(platform: PlatformInfo, config: VerifierConfig, extra_env: dict[str, str] | None) -> bool:
    """Whether a spare gets the parent's shared Triton launchers (triton_launchers.py): the same rule."""
    return config.share_triton_launchers and _own_triton_cache(platform, extra_env)


def _own_triton_cache(platform: PlatformInfo, extra_env: dict[str, str] | None) -> bool:
    """On NVIDIA, a spare whose Triton cache is its own (not the references' shared one)."""
    return platform.name == "cuda" and "TRITON_CACHE_DIR" not in (extra_env or {})


class Spare:
    """One started worker process waiting (or about to wait) for its single job.

    Its folder holds `scratch/` (its cwd, TMPDIR and HOME: the one place it may write) and `in/`
    (read-only: what the parent hands it for its job, `hand()`). The OS sandbox is entered before
    the job is known, so what the job needs is put where the sandbox already lets it read."""

    def __init__(self, platform: PlatformInfo, config: VerifierConfig | None = None, base_tmp: str | None = None,
                 gpu_mem_fraction: float | None = None, extra_env: dict[str, str] | None = None,
                 start: str | None = None, readable: Sequence[str] = (), writable: Sequence[str] = ()) -> None:
        config = config or VerifierConfig.from_env()
        self.platform = platform
        self.root, self.workdir, self.in_dir = make_worker_dirs(base_tmp)
        self.sandbox = worker_sandbox_plan(platform, config, self.workdir, [self.in_dir, *readable], writable)
        if self.sandbox is not None and os.geteuid() == 0 and not platform.interpreter:
            # GPU workers run gcc (Triton's launcher build); interpreter workers run no compiler
            problem = unreachable_for_root_worker(self.workdir)
            if problem:
                shutil.rmtree(self.root, ignore_errors=True)
                raise InfrastructureError(
                    f"running as root with the OS sandbox: {problem}",
                    hint="put the verifier's temp folders where every parent folder is searchable by group root or "
                         "by others (e.g. TMPDIR=/tmp, or chmod g+x the folder named), run as a non-root user, or "
                         "AMDKV_SANDBOX=off (no OS confinement)")
        env, self.device = worker_env(platform, self.workdir, os.environ, gpu_mem_fraction, config)
        env.update(extra_env or {})
        if seeds_triton_stub(platform, config, extra_env):  # the gcc run every spare would repeat
            from amdkv.verify.triton_stubs import seed_spare_cache

            seed_spare_cache(env["TRITON_CACHE_DIR"], str(config.cache_path / "triton-stubs"))
        if seeds_triton_launchers(platform, config, extra_env):  # the gcc run per signature every candidate repeats
            from amdkv.verify.triton_launchers import LAUNCHERS_DIR, seed_launchers

            seed_launchers(env["TRITON_CACHE_DIR"], config.cache_path / LAUNCHERS_DIR)
        self.started = time.monotonic()
        self.stderr_path = os.path.join(self.workdir, "worker_stderr.txt")
        self._env = env
        # the host-memory cap (process.cap_host_memory, whatever the sandbox mode): AMDKV_MEM_CAP_GIB on
        # interpreter platforms, AMDKV_GPU_HOST_MEM_GIB on GPUs (4096 GiB for reference workers)
        self._mem_cap = host_memory_cap_bytes(platform, config)
        self.start_method = start or start_method(config.spare_start)
        self.fork_failure: str | None = None  # why this spare runs exec'd although fork was asked for
        self.proc: ExecWorkerProcess | ForkedWorkerProcess
        if self.start_method == "fork":
            try:
                self.proc = ForkedWorkerProcess(env, self.workdir, self.stderr_path, self._mem_cap,
                                                sandbox=self.sandbox, owned_dir=self.root)
            except InfrastructureError as exc:
                self._fall_back_to_exec(f"the fork server could not fork it: {exc}")
        else:
            self.proc = ExecWorkerProcess(env, self.workdir, self.stderr_path, self._mem_cap, sandbox=self.sandbox)
        self._ready = False
        self._reaping = False  # a background thread waits for the exit (after DONE)
        self.ready_wait_s = 0.0  # how long a job waited for this spare's start-up (0 when it was ready)
        # time.monotonic() when the job was sent and when DONE was seen: CLOCK_MONOTONIC is one clock
        # for every process on Linux, so with the worker's own stamps they give the hand-off delays
        self.job_sent_at: float | None = None
        self.done_seen_at: float | None = None

    def _fall_back_to_exec(self, why: str) -> None:
        """A forked spare that cannot start is replaced by an exec'd one, so a fork-server problem
        costs speed, never verdicts. Said once per process on stderr and kept in `fork_failure`."""
        global _FORK_FALLBACK_SAID
        if not _FORK_FALLBACK_SAID:
            _FORK_FALLBACK_SAID = True
            print(f"amdkv: forked spare failed ({why[:500]}); using exec'd spares where that happens "
                  "(AMDKV_SPARE_START=exec avoids the fork server)", file=sys.stderr, flush=True)
        self.fork_failure = why
        self.start_method = "exec"
        self.proc = ExecWorkerProcess(self._env, self.workdir, self.stderr_path, self._mem_cap, sandbox=self.sandbox)

    def hand(self, path: str | os.PathLike[str], name: str | None = None) -> str:
        """Let the worker read `path` (a candidate file, an inputs file, a built extension): a hard
        link in its read-only `in/` folder, or a copy where the file lives on another file system.
        Returns the path the worker reads it by."""
        dest = os.path.join(self.in_dir, name or os.path.basename(path))
        try:
            os.link(path, dest)
        except OSError:  # another file system (or links refused): a copy, made in the kernel
            shutil.copyfile(path, dest)
        return dest

    def _stderr_text(self) -> str:
        return tail_bytes(self.stderr_path, STDERR_KEEP_BYTES).decode(errors="replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Block until the worker said READY (torch/triton imported, device set up)."""
        if self._ready:
            return
        t_wait = time.monotonic()
        got = self.proc.wait_for(READY_LINE, t_wait + timeout)
        if got == "eof" and self.start_method == "fork":  # died starting up: try the exec'd way once
            code = self.proc.wait(10.0)
            self._fall_back_to_exec(f"it exited during start-up (code {code}): {self._stderr_text()[-1000:]}")
            got = self.proc.wait_for(READY_LINE, t_wait + timeout)
        if got == "timeout":
            self.kill()
            raise InfrastructureError(f"verifier worker did not start within {timeout:.0f} s",
                                      hint="the machine may be overloaded; retry")
        if got == "eof":
            self.proc.wait(10.0)
            raise InfrastructureError(f"verifier worker exited during start-up: {self._stderr_text()[-1500:]}",
                                      hint="its stderr (above) says why; check that torch and triton import "
                                           "in this Python")
        self._ready = True
        self.ready_wait_s = time.monotonic() - t_wait

    def run(self, job: WorkerJob, timeout: float, label: str | None = None) -> ProcessResult:
        """Send the one job; return when the worker says DONE (its report is complete), when it
        exits, or at `timeout`. The process group is killed in every case. After DONE the parent
        does not wait for the exit: tearing down a GPU context takes time that is neither the
        candidate's nor the verifier's, so a background thread reaps the process.

        `label` ("reference l1_relu") goes into JOB_LABEL_FILE in the worker's folder (its cwd), for
        tools that look at processes from outside: a GPU-memory sampler saw one worker hold 38 GB on
        2026-12-05 and could not say whose job it ran. Diagnostics only: the worker may rewrite it."""
        self.wait_ready()
        if label:
            with contextlib.suppress(OSError):
                Path(self.workdir, JOB_LABEL_FILE).write_text(label + "\n")
        start = self.job_sent_at = time.monotonic()
        deadline = start + timeout
        oom_kills_before = oom_kills()
        self.proc.send_job(job.to_json().encode())
        got = self.proc.wait_for(DONE_LINE, deadline)
        self.done_seen_at = time.monotonic()
        self.proc.kill()
        returncode: int | None
        if got == "seen":
            returncode = 0
            self._reaping = True
            threading.Thread(target=self.proc.wait, args=(None,), daemon=True, name="amdkv-reap").start()
        else:
            returncode = self.proc.wait(max(1.0, deadline - time.monotonic()) if got == "eof" else 10.0)
        result = ProcessResult(returncode, self.proc.stdout_text(), self._stderr_text(), got == "timeout",
                               time.monotonic() - start)
        if not result.timed_out:  # a timed-out worker is SIGKILLed by us, whatever else the killer did
            result.host_oom = killed_by_host_oom(result.signal_name, oom_kills_before, oom_kills())
        return result

    def discard(self) -> None:
        """A spare that never got a job: told to exit, its folder removed."""
        self.proc.close_idle()
        self.cleanup()

    def kill(self) -> None:
        self.proc.kill()
        if not self._reaping:  # after DONE the reaper thread waits for the exit, not the verdict
            self.proc.wait(5.0)  # a SIGKILLed group the kernel has not reaped yet: don't block the pool

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


class BusySpares:
    """The spares a verifier's jobs are using right now (candidate and reference workers), so that
    `cancel()` can kill them at once. Once cancelled, no spare may start a job any more: a job's
    retry after the kill (a reference worker killed by a signal is retried) fails instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: set[Spare] = set()
        self.cancelled = False

    @contextlib.contextmanager
    def using(self, spare: Spare) -> Iterator[Spare]:
        with self._lock:
            if self.cancelled:
                raise InfrastructureError("the verifier was cancelled", hint="open a new verifier")
            self._spares.add(spare)
        try:
            yield spare
        finally:
            with self._lock:
                self._spares.discard(spare)

    def cancel(self) -> int:
        """Kill every busy spare's process group (not waiting for the exits: each job's thread sees
        its worker gone and unwinds); returns how many were killed."""
        with self._lock:
            self.cancelled = True
            spares = list(self._spares)
        for spare in spares:
            spare.proc.kill()
        return len(spares)


class SparePool:
    """Keeps `size` spares started for one platform/device; `take()` hands one out and starts
    its replacement in the background."""

    def __init__(self, platform: PlatformInfo, config: VerifierConfig, size: int = 1) -> None:
        self.platform = platform
        self.config = config
        self.size = max(0, size)
        # None: the default share for `size` concurrent candidates; 0: no cap.
        gpu_mem_fraction = config.gpu_mem_fraction
        if gpu_mem_fraction is None and not platform.interpreter:
            gpu_mem_fraction = default_gpu_mem_fraction(self.size)
        self.gpu_mem_fraction = gpu_mem_fraction or None
        self._spares: list[Spare] = []
        self._lock = threading.Lock()
        self._closed = False
        for _ in range(self.size):
            self._spares.append(self._start())

    def _start(self, config: VerifierConfig | None = None) -> Spare:
        return Spare(self.platform, config or self.config, gpu_mem_fraction=self.gpu_mem_fraction)

    def start_with_file_limit(self, file_size_bytes: int) -> Spare:
        """A spare like the pool's whose per-file limit (RLIMIT_FSIZE) is `file_size_bytes`. The limit is
        set as the worker starts and only raised by a privileged process, so a task whose outputs need
        more than the pool's limit gets a worker of its own (disk_admission.candidate_file_need)."""
        return self._start(dataclasses.replace(self.config, sandbox_file_size_gib=file_size_bytes / 2**30))

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
                s.discard()
            self._spares.clear()

    def __enter__(self) -> "SparePool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
