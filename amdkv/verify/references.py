"""Reference outputs of a task's cases: read from the reference cache, or computed once per
(task, device, settings) in a reference worker while other candidates of that task wait.

Moved out of verifier.py unchanged (issue 20: one module per job); `Verifier` gets these methods
by inheriting `ReferencesMixin`, and `amdkv.verify.verifier` re-exports the module-level names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from amdkv.config import VerifierConfig
from amdkv.errors import HostOutOfMemory, InfrastructureError
from amdkv.tasks.types import Task
from amdkv.verify.disk_admission import ADMISSION, past_reservation, reference_disk_need
from amdkv.verify.disk_space import LOW_DISK_HINT, low_disk, verifier_paths
from amdkv.verify.gpu_memory import is_out_of_memory
from amdkv.verify.gpu_specs import flush_bytes
from amdkv.verify.host_oom import HOST_OOM_HINT
from amdkv.verify.pool import Spare, gpu_lock_key
from amdkv.verify.reference_cache import CaseFiles, Leases, case_key, evict, make_room, touch
from amdkv.verify.shared_exclusive import SharedExclusiveGate
from amdkv.verify.worker_process import stderr_excerpt
from amdkv.verify.worker_protocol import (OutputWriteError, ProtocolError, ReferenceCaseJob, ReferenceCaseReport,
                                          ReferenceJob, ReferenceResult, WorkerReport)

_LOG = logging.getLogger("amdkv.verify")
WORKER_DIED_HINT = "the task file itself is broken or the machine is overloaded"
BASE_SEED = 1234
INIT_SEED = 42


class ReferenceFailed(InfrastructureError):
    """The task's reference could not be computed. For tasks whose reference is a benchmark's own
    kernel (`metadata["reference_failure"] == "unverifiable"`) that makes the task unverifiable on
    this platform; for a PyTorch reference it stays a harness failure (infra_error)."""

    killed_by_signal: bool = False  # the worker died by a signal without a report (retried: reference_attempts)
    host_oom: str | None = None  # ... by SIGKILL while the host's OOM killer ran (host_oom.py): run again alone
    timed_out: bool = False  # it ran past `reference_timeout`: a setting of this run, said as its own reason


def reference_attempts(config: VerifierConfig) -> list[tuple[str, str | None, VerifierConfig]]:
    """How a reference worker is started, attempt after attempt, while each is killed by a signal:
    (label, spare start, config). First as the verifier starts every worker; then exec'd (no state
    inherited from the fork server); then, unless the sandbox is `require`d, exec'd without the OS
    sandbox. A reference is the task's own code, which the user chose to run: the sandbox confines
    candidates, and a reference that only crashes inside it is the sandbox's failure, said on stderr
    (the verdicts are the same: a reference's outputs do not depend on how its worker started)."""
    attempts: list[tuple[str, str | None, VerifierConfig]] = [(f"{config.spare_start} start", None, config),
                                                                ("exec'd", "exec", config)]
    if config.sandbox != "off" and config.sandbox != "require":
        attempts.append(("exec'd, OS sandbox off", "exec", dataclasses.replace(config, sandbox="off")))
    return attempts


_REFERENCE_LOCKS: dict[tuple, threading.Lock] = {}
# the per-file write limit of reference workers (trusted code; candidates keep AMDKV_SANDBOX_FILE_SIZE_GIB)
REFERENCE_FILE_SIZE_GIB = 4096.0
# ... and its host memory (RLIMIT_DATA on GPUs; candidates keep AMDKV_GPU_HOST_MEM_GIB). A reference holds
# every trial's inputs, outputs and goldens until it saves them, and re-runs each trial of a program to
# check it reproduces: ROCmBench's rmsnorm_fwd needs ~35 GB that way, past the candidates' 32 GiB, and
# was unverifiable for it on the H100 (2026-12-06), alone as beside others. The host is its bound.
REFERENCE_HOST_MEM_GIB = 4096.0
FILE_SIZE_HINT = ("raise AMDKV_SANDBOX_FILE_SIZE_GIB (the largest file a worker may write) above the size the "
                  "message gives, or verify the task on fewer/smaller cases")
REFERENCE_TIMEOUT = "reference_timeout"  # unverifiable's reason when a benchmark's reference ran past the limit
# Reference computations that failed in this process, by the same key as the lock: the other
# candidates of that task get the same answer without running the failing reference again.
_REFERENCE_FAILURES: dict[tuple, tuple[str, bool]] = {}  # -> (message, timed out)
_REFERENCE_LOCKS_GUARD = threading.Lock()
# One gate per physical device: references pass it together; one that ran out of memory runs again
# alone (shared_exclusive.py). Per process: references of other processes on the same GPU are not seen.
_REFERENCE_GATES: dict[str, SharedExclusiveGate] = {}


def _reference_gate(device_key: str) -> SharedExclusiveGate:
    with _REFERENCE_LOCKS_GUARD:
        return _REFERENCE_GATES.setdefault(device_key, SharedExclusiveGate())


def _reference_lock(key: tuple) -> threading.Lock:
    """One lock per (task, device, settings) in this process, shared by every Verifier in it."""
    with _REFERENCE_LOCKS_GUARD:
        return _REFERENCE_LOCKS.setdefault(key, threading.Lock())


def add_reclaimed(timings: dict[str, float], freed: int) -> None:
    """Add `freed` bytes of reference cache removed to make room (`ReferencesMixin.reclaimer`) to a
    verdict's `disk_reclaimed_mib`: the reference's admission and the candidate's add to one figure."""
    timings["disk_reclaimed_mib"] = round(timings.get("disk_reclaimed_mib", 0.0) + freed / 2 ** 20, 3)


class ReferencesMixin:
    """The reference half of `Verifier` (uses its `config`, `platform`, `trials`, `timeout`,
    `time_performance`, `compile_baseline`, `_device_desc`, `_gpu_spec`, `reference_runs`, `_busy`)."""

    @property
    def reference_timeout_s(self) -> float:
        """Seconds a task's reference worker may run: `reference_timeout`, unset: the candidate
        timeout, at least 300 s."""
        return self.config.reference_timeout or max(self.timeout, 300.0)

    def _trials_for(self, case: Any) -> int:
        return self.trials if case.is_correctness else 1

    def _references(self, task: Task, cases: list[Any], leases: Leases) -> dict[str, dict[str, Any]]:
        """Reference files per case name, computing the missing ones in a reference worker. Each case's
        entry is held in `leases` (the caller releases them once the candidate is judged), so no
        eviction removes it meanwhile.

        Several candidates of one task are often verified at once (an eval's samples are adjacent):
        they wait for one reference computation instead of each starting their own.
        """
        # the reference timeout is part of the key: a failure remembered as "timed out" under one limit is
        # not the answer under a longer one (a second Verifier of this process with its own setting)
        lock_key = (task.source_hash, self._device_desc, self.trials, self.time_performance, self.compile_baseline,
                    self.reference_timeout_s)
        with _reference_lock(lock_key):
            failed = _REFERENCE_FAILURES.get(lock_key)
            if failed is not None:  # computed (and failed) for an earlier candidate of this task
                again = ReferenceFailed(failed[0])
                again.timed_out = failed[1]
                raise again
            try:
                return self._references_locked(task, cases, leases)
            except ReferenceFailed as exc:
                # Only a benchmark's own reference kernel that cannot run on this platform is
                # remembered; a PyTorch reference that failed (overload, a timeout) is retried by the
                # next candidate, or a long-running service would refuse that task forever.
                # (and never one that cancel() killed: the next Verifier of this process would inherit it)
                if task.metadata.get("reference_failure") == "unverifiable" and not self._busy.cancelled:
                    _REFERENCE_FAILURES[lock_key] = (str(exc), exc.timed_out)
                raise

    def _references_locked(self, task: Task, cases: list[Any], leases: Leases) -> dict[str, dict[str, Any]]:
        refs: dict[str, dict[str, Any]] = {}
        missing = []
        for case in cases:
            seeds = [BASE_SEED + i for i in range(self._trials_for(case))]
            timed = self.time_performance and case.is_performance
            key = case_key(task.source_hash, case.name, seeds, INIT_SEED, self._device_desc,
                           timed and (self.compile_baseline or "eager-only"), True)
            files = CaseFiles(key, self.config.cache_path)
            refs[case.name] = {"files": files, "seeds": seeds, "timed": timed}
            leases.take(files)  # before the lookup: what it finds stays until the candidate is judged
            report = self._cached_report(files)
            if report is not None:
                refs[case.name]["report"] = report
                touch(files)  # recently used: the last to be evicted (reference_cache.evict)
            else:
                missing.append(case)
        if missing:
            self.reference_runs += 1
            self._evict_references()
            self._compute_references(task, missing, refs)
        return refs

    @staticmethod
    def _cached_report(files: CaseFiles) -> ReferenceCaseReport | None:
        """The cached case's report, or None when the case must be computed: files missing, or a report
        this version cannot read (written by another development version under the same key: during
        session 23 two report formats were written under one REPORT_FORMAT, and every verification of
        such a task was `infra_error` until the cache was cleared). The new run replaces the files."""
        if not files.complete():
            return None
        try:
            return files.read_report()
        except ProtocolError as exc:
            _LOG.warning("reference cache entry %s is unreadable (%s): computing it again", files.dir, exc)
            return None

    def _compute_references(self, task: Task, cases: list[Any], refs: dict[str, dict[str, Any]]) -> None:
        # The reference runs only trusted code (the task, PyTorch, torch.compile): its compile caches
        # are shared across reference workers so the torch.compile baseline of a task is not rebuilt
        # from scratch by every process (candidate workers keep private caches, by design).
        shared = self.config.cache_path / "compile-cache"
        compile_env = {"TORCHINDUCTOR_CACHE_DIR": str(shared / "inductor"), "TRITON_CACHE_DIR": str(shared / "triton")}
        jobs = []
        for case in cases:
            r = refs[case.name]
            r["files"].dir.mkdir(parents=True, exist_ok=True)
            tmp_dir = tempfile.mkdtemp(dir=r["files"].dir)
            r["tmp"] = tmp_dir
            jobs.append(ReferenceCaseJob(name=case.name, seeds=r["seeds"], init_seed=INIT_SEED,
                                         inputs_file=os.path.join(tmp_dir, "inputs.pt"),
                                         expected_file=os.path.join(tmp_dir, "expected.pt"),
                                         golden=bool(task.metadata.get("golden", True)),
                                         golden_oom_fallback=False, time=r["timed"],
                                         flush_bytes=flush_bytes(self._gpu_spec),
                                         compile_baseline=self.compile_baseline))
        for folder in compile_env.values():
            os.makedirs(folder, exist_ok=True)
        # the reference worker reads its task's folder (trusted code: a task may import what lies beside
        # it, as a benchmark task's program does) and writes only its cases' files and the shared caches
        writable = [refs[c.name]["tmp"] for c in cases] + list(compile_env.values())
        need = self._reference_need(task, cases)
        try:
            # (free disk was checked when the verification started: Verifier.verify_now)
            try:
                first = refs[cases[0].name]
                with self._reference_admission(need, lambda n: first.update(reclaimed=first.get("reclaimed", 0) + n)):
                    report = self._run_reference_gated(task, jobs, compile_env, writable)
                if report.fatal is not None and report.fatal.error_type == OutputWriteError.__name__:
                    # the machine's failure, whatever the disk says now (other writers may have freed it)
                    self._check_disk()
                    limited = report.fatal.file_size_limit_bytes is not None
                    raise InfrastructureError(f"the reference outputs of task {task.id} could not be written: "
                                              f"{report.fatal.error}",
                                              hint=FILE_SIZE_HINT if limited else LOW_DISK_HINT)
                if report.fatal is not None:
                    raise ReferenceFailed(f"the reference for task {task.id} raised "
                                          f"{report.fatal.error_type}: {report.fatal.error}\n{report.fatal.traceback}",
                                          hint="fix the task file (it is trusted code)")
            except ReferenceFailed as exc:
                self._check_disk(exc)  # a full disk fails references in odd ways: never blame the task for it
                raise
            for crep in report.result_of(ReferenceResult).cases:
                r = refs[crep.name]
                files: CaseFiles = r["files"]
                os.replace(os.path.join(r["tmp"], "inputs.pt"), files.inputs)
                os.replace(os.path.join(r["tmp"], "expected.pt"), files.expected)
                os.rmdir(r["tmp"])
                files.write_report(crep)
                r["report"] = crep
                r["computed"] = True  # by this verification: its steps' seconds go into the verdict
            self._note_reference_over_reservation(task, cases, refs, need)
        finally:
            for case in cases:  # what a failed run left in its cases' scratch folders (gone after success)
                shutil.rmtree(refs[case.name]["tmp"], ignore_errors=True)

    @staticmethod
    def computed_reference_timings(refs: dict[str, dict[str, Any]]) -> dict[str, float]:
        """Verdict timings from the cases this verification computed (none when every case came from the
        cache): `reference_<step>_s`, the reference worker's steps (worker_protocol.REFERENCE_PHASES),
        summed; `reference_disk_over_reservation_mib` where its files passed its disk reservation; and
        `disk_reclaimed_mib`, the reference cache's entries removed to make room for it (`reclaimer`)."""
        total: dict[str, float] = {}
        for ref in refs.values():
            if ref.get("computed"):
                for name, seconds in ref["report"].phase_s.items():
                    key = f"reference_{name}_s"
                    total[key] = round(total.get(key, 0.0) + seconds, 3)
            if ref.get("over_reservation"):
                total["reference_disk_over_reservation_mib"] = round(ref["over_reservation"] / 2 ** 20, 3)
            if ref.get("reclaimed"):
                add_reclaimed(total, ref["reclaimed"])
        return total

    @staticmethod
    def _note_reference_over_reservation(task: Task, cases: list[Any], refs: dict[str, dict[str, Any]],
                                         need: int) -> None:
        """Where the reference's files (inputs, expected outputs) take more than its disk reservation (the
        loader's meta-device size: `reference_disk_need`) plus the slack, say so on the first case's entry
        and in the log: admission is only as right as that estimate (disk_admission.past_reservation)."""
        over = past_reservation(lambda: sum(os.stat(p).st_size for c in cases
                                            for p in (refs[c.name]["files"].inputs, refs[c.name]["files"].expected)),
                                need)
        if over:
            refs[cases[0].name]["over_reservation"] = over
            _LOG.warning("task %s: the reference wrote %.2f GiB more than its disk reservation (%.2f GiB): "
                         "verifications beside it may meet a full disk", task.id, over / 2 ** 30, need / 2 ** 30)

    def _reference_need(self, task: Task, cases: list[Any]) -> int:
        """Bytes the reference run of `cases` writes, from the loader's size (0: the task does not say)."""
        return reference_disk_need(task.metadata, len(task.cases), sum(self._trials_for(c) for c in cases))

    def _reference_admission(self, need: int, on_freed: Callable[[int], None]) -> contextlib.AbstractContextManager[Any]:
        """Room on the cache's disk for the reference's files (`need`: `_reference_need`) beside the
        candidates and references running on this machine (disk_admission.py), when the task says how
        much it writes (`reference_trial_bytes`); else nothing to wait for."""
        if not need:
            return contextlib.nullcontext()
        folder = str(self.config.cache_path)
        return ADMISSION.admitted(folder, need, int(self.config.min_free_disk_gib * 2 ** 30),
                                  cancelled=lambda: self._busy.cancelled, reclaim=self.reclaimer(folder, on_freed))

    def reclaimer(self, folder: str, on_freed: Callable[[int], None]) -> Callable[[int], int] | None:
        """disk_admission's `reclaim` for a run writing under `folder`: the reference cache's entries no
        verification holds, least recently used first (reference_cache.make_room), where the cache is on
        `folder`'s file system (None elsewhere: removing them would free nothing there). `on_freed` gets
        the bytes each removal freed (the verdict's `disk_reclaimed_mib`)."""
        cache = self.config.cache_path
        try:
            if os.stat(cache).st_dev != os.stat(folder).st_dev:
                return None
        except OSError:  # no cache yet: nothing to remove
            return None

        def reclaim(short: int) -> int:
            removed = make_room(cache, short)
            freed = sum(size for _, size in removed)
            if removed:
                _LOG.info("disk short by %.2f GiB (beyond what running verifications hold): removed %d unused "
                          "reference cache entries (%.2f GiB)", short / 2 ** 30, len(removed), freed / 2 ** 30)
                on_freed(freed)
            return freed
        return reclaim

    def _evict_references(self) -> None:
        """Keep the reference cache under `reference_cache_gib` (unset: no limit) before adding to it."""
        cap = self.config.reference_cache_gib
        if cap is None:
            return
        # an entry a verification in flight (in any process sharing the cache) holds is kept
        removed, left = evict(self.config.cache_path, int(cap * 2**30))
        if removed:
            _LOG.info("reference cache over %.3g GiB: removed %d least recently used entries (%.2f GiB), "
                      "%.2f GiB left", cap, len(removed), sum(n for _, n in removed) / 2**30, left / 2**30)

    def _check_disk(self, failure: ReferenceFailed | None = None) -> None:
        """InfrastructureError (infra_error, never remembered as the task's failure) when the cache
        or temp folder's disk is nearly full (disk_space.py): before each verification, and when a
        reference failed (`failure`, the failure it probably caused, kept in the message). A nearly full
        cache disk first gives up the reference entries nobody uses, least recently used first, down to
        the floor (reference_cache.make_room): under a cap or none, finished entries stay until then, and
        they are recomputed when needed. Before a verification the disk is then looked at again; after a
        failed reference the failure stays the disk's (it met the full disk), and the room is for the next."""
        paths = verifier_paths(self.config.cache_path)
        low = low_disk(paths, self.config.min_free_disk_gib)
        reclaim = self.reclaimer(str(self.config.cache_path), lambda freed: None) if low else None
        if reclaim is not None:
            short = int(self.config.min_free_disk_gib * 2 ** 30) - shutil.disk_usage(self.config.cache_path).free
            if short > 0 and reclaim(short) and failure is None:
                low = low_disk(paths, self.config.min_free_disk_gib)
        if low:
            cause = f"; the reference failed: {failure.message}" if failure is not None else ""
            raise InfrastructureError(low + cause, hint=LOW_DISK_HINT) from failure

    def _run_reference_gated(self, task: Task, jobs: list[ReferenceCaseJob], compile_env: dict[str, str],
                             writable: list[str]) -> WorkerReport:
        """`_run_reference_worker_retrying` beside the other references on this device; once more, alone
        among them, when it ran out of memory: the GPU's (an out-of-memory error in its report) or the
        host's (its worker SIGKILLed while the kernel's OOM killer ran, host_oom.py). A reference is
        trusted code that fits the device (or its run fails again alone, and that failure is the
        verdict's): out of memory beside others is the moment's contention, not the task's failure.
        Killed by the host's OOM killer alone too, it is `infra_error`/`host_oom`, never remembered
        as the task's failure."""
        gate = _reference_gate(gpu_lock_key(self.platform.device))
        with gate.shared():
            try:
                report = self._run_reference_worker_retrying(task, jobs, compile_env, writable)
                fatal = report.fatal
                if fatal is None or not is_out_of_memory(fatal.error_type, fatal.error):
                    return report
                why = f"{fatal.error_type}: {fatal.error[:200]}"
            except ReferenceFailed as exc:
                if not exc.host_oom:
                    raise
                why = exc.host_oom
        print(f"amdkv: the reference for task {task.id} ran out of memory beside other references ({why}); "
              "running it again alone", file=sys.stderr, flush=True)
        # alone, a golden that still does not fit is dropped (the eager output is then the expected one)
        # rather than failing a reference whose own computation fits
        alone = [dataclasses.replace(job, golden_oom_fallback=True) for job in jobs]
        with gate.exclusive():
            try:
                return self._run_reference_worker_retrying(task, alone, compile_env, writable)
            except ReferenceFailed as exc:
                if exc.host_oom:
                    raise HostOutOfMemory(f"the reference for task {task.id}, run alone: {exc.host_oom}",
                                          hint=HOST_OOM_HINT) from exc
                raise

    def _run_reference_worker_retrying(self, task: Task, jobs: list[ReferenceCaseJob], compile_env: dict[str, str],
                                       writable: list[str]) -> WorkerReport:
        """`_run_reference_worker`, again when a worker was killed by a signal, each time in a worker
        started differently (`reference_attempts`). Trusted code killed by a signal is the machine's
        failure, not the task's: on the H200 cold reference workers died with SIGSEGV under the OS
        sandbox, 1-2 of 12 tasks in session 8 and most TritonBench-G references on 2026-12-02
        (docs/gpu.md, Known gaps). Every failure is said on stderr with its crash report, naming the
        attempt, so a GPU run tells which start (fork, exec, sandbox) the crash follows; all of them
        are kept in the error if every attempt fails."""
        attempts = reference_attempts(self.config)
        failures: list[str] = []
        for number, (how, start, config) in enumerate(attempts, 1):
            try:
                return self._run_reference_worker(task, jobs, compile_env, writable, start=start, config=config)
            except ReferenceFailed as exc:
                if not exc.killed_by_signal or exc.host_oom:  # the host's OOM killer: _run_reference_gated
                    raise
                failures.append(f"attempt {number} of {len(attempts)} ({how}): {exc}")
                if number < len(attempts):
                    print(f"amdkv: {failures[-1]} -- retrying in a fresh worker", file=sys.stderr, flush=True)
        raise ReferenceFailed("the reference worker was killed by a signal in every attempt; " + " ; ".join(failures),
                              hint=WORKER_DIED_HINT)

    def _run_reference_worker(self, task: Task, jobs: list[ReferenceCaseJob], compile_env: dict[str, str],
                              writable: list[str], *, start: str | None = None,
                              config: VerifierConfig | None = None) -> WorkerReport:
        """One reference worker for `jobs` (started as `start`, with `config`'s sandbox: the
        verifier's by default); its report, or ReferenceFailed (`killed_by_signal` when the worker
        died by a signal without a report)."""
        # trusted code: its outputs file is as large as the task's outputs (12 GiB for KernelBench's
        # 9_Tall_skinny), so the per-file limit that bounds a candidate's writes does not apply; the
        # free-disk check and the reference cache's cap bound the disk. Nor the candidates' host
        # memory cap (REFERENCE_HOST_MEM_GIB).
        config = dataclasses.replace(config or self.config, sandbox_file_size_gib=REFERENCE_FILE_SIZE_GIB,
                                     gpu_host_mem_gib=REFERENCE_HOST_MEM_GIB)
        spare = Spare(self.platform, config, extra_env=compile_env, start=start,
                      readable=[os.path.dirname(task.path)], writable=writable)
        try:
            report_path = os.path.join(spare.workdir, "reference_report.json")
            job = ReferenceJob(task_path=task.path, device=spare.device, cases=jobs, report_path=report_path)
            with self._busy.using(spare):  # cancel() kills it (and refuses the retry that would follow)
                proc = spare.run(job, timeout=self.reference_timeout_s, label=f"reference {task.id}")
            if proc.timed_out or not os.path.isfile(report_path):
                failed = ReferenceFailed(
                    f"the reference for task {task.id} failed (rc {proc.returncode}, "
                    f"{'timed out' if proc.timed_out else 'no report'}): {stderr_excerpt(proc.stderr, 3000)}",
                    hint=WORKER_DIED_HINT)
                failed.killed_by_signal = not proc.timed_out and (proc.returncode or 0) < 0
                failed.timed_out = proc.timed_out
                failed.host_oom = proc.host_oom
                raise failed
            return WorkerReport.from_json(Path(report_path).read_text())
        finally:
            spare.cleanup()
