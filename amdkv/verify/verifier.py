"""The verifier: one candidate against one task on one platform -> one `Verdict`.

Order of work (cheap and decisive first):
 1. read the candidate; static AST checks in this (trusted) process;
 2. platform limits (bf16 / libdevice / inline asm on the CPU interpreter -> `unverifiable`);
 3. reference outputs from the cache, or from a reference worker (in parallel with step 4);
 4. the candidate in a fresh spare worker, with runtime guards, under a timeout;
 5. comparison here, in the parent, against eager and float64-golden references;
 6. on GPUs, timings -> speedup and sol; with `archs`, AMD compiles of the captured kernels.

This module orchestrates; each job has its own module, mixed into `Verifier`: references.py
(step 3), judging.py (step 5 and `finish`), speed.py (step 6's numbers). Language backends use
only `backend_api.RunAndJudge`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from amdkv.config import VerifierConfig, resolve_config
from amdkv.errors import InfrastructureError
from amdkv.tasks.types import Task
from amdkv.verify import fork_server, os_sandbox, static_checks
from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE, LocalVerifier, deadline_passed
from amdkv.verify.candidate import Candidate
from amdkv.verify.gpu_memory import candidate_floor_bytes
from amdkv.verify.disk_admission import (ADMISSION, candidate_disk_need, candidate_file_need, checked_calls_bytes,
                                         expected_file_sizes, handed_copy_bytes, over_reservation)
from amdkv.verify.gpu_specs import flush_bytes, spec_for_device_name
from amdkv.verify.output_spill import resolve_spilled, spill_folder_for
# The job-by-job halves of Verifier (issue 20); their module-level names stay importable from here.
from amdkv.verify.judging import (POLICY_EXEMPT_DYNAMIC, RUNTIME_ERROR_FINDINGS, JudgingMixin,  # noqa: F401
                                  _same_bits, judge_slots, load_tensor_file)
from amdkv.verify.platform import PlatformInfo, detect_platform
from amdkv.verify.pool import BusySpares, Spare, SparePool
from amdkv.verify.program import (allowed_imports, candidate_part, program_findings, program_spec,
                                  program_text, trusted_first_line)
from amdkv.verify.reference_cache import Leases
from amdkv.verify.references import (BASE_SEED, INIT_SEED, REFERENCE_TIMEOUT, ReferenceFailed,  # noqa: F401
                                     ReferencesMixin, add_reclaimed)
from amdkv.verify.speed import SpeedMixin
from amdkv.verify.verdict import (COMPILE_ERROR, HACK_DETECTED, INFRA_ERROR, MISMATCH, OK, UNVERIFIABLE,
                                  ArchResources, Verdict)
from amdkv.verify.worker_protocol import BackendJobPart, CandidateCaseJob, CandidateJob, CandidateResult, WorkerReport

_LOG = logging.getLogger("amdkv.verify")

# Reasons that mean "the candidate file is not a candidate at all" (the CLI exits 2 on these).
BAD_INPUT_REASONS = frozenset({"no_model_new", "signature_mismatch", "unreadable_candidate"})
# Findings that are not cheating but make the interpreter unable to judge the candidate.
INTERPRETER_UNSUPPORTED = {"bfloat16": "bf16_on_interpreter", "libdevice": "libdevice_on_interpreter",
                           "inline_asm_elementwise": "inline_asm_on_interpreter"}
# Static finding codes each policy does not act on (config.POLICIES; None: every anti-hack finding).
# `reference` runs a benchmark's plain-PyTorch reference as a candidate (a sanity run): only the
# rules that refuse PyTorch doing the work are off. `benchmark` applies the benchmark's own rule.
POLICY_EXEMPT_STATIC: dict[str, frozenset[str] | None] = {
    "strict": frozenset(), "reference": frozenset({"torch_fallback", "no_kernel"}), "benchmark": None}
DEFAULT_TRIALS = 3


# env["static_checks"] of a verdict made with AMDKV_UNSAFE_SKIP_STATIC_CHECKS (test only).
STATIC_CHECKS_SKIPPED = "skipped (AMDKV_UNSAFE_SKIP_STATIC_CHECKS, test only)"


def sandbox_status(config: VerifierConfig) -> dict[str, Any]:
    """The OS sandbox this config's workers get here (os_sandbox.status); `require` on a machine
    that cannot provide every part is an InfrastructureError naming what is missing."""
    try:
        return os_sandbox.status(config.sandbox)
    except os_sandbox.SandboxError as exc:
        raise InfrastructureError(str(exc.strerror or exc), hint="run on a kernel with user namespaces, "
                                  "Landlock (ABI >= 6) and seccomp, or set AMDKV_SANDBOX=auto to run with the "
                                  "parts this machine has (docs/sandbox.md)") from None


def never_ok_without_static_checks(v: Verdict) -> None:
    """A verdict made with the static checks off (the test-only switch) can say that a candidate
    failed, never that it passed: a pass without the anti-hack rules does not show that the work
    was done in a kernel. `unverifiable` (reason `static_checks_skipped`): this configuration
    cannot judge a pass, it is not the candidate's fault (zero advantage in RL, not zero reward),
    and the verdict cache never stores it (verdict_cache.VerdictCache.put)."""
    if v.status == OK:
        v.status, v.reason, v.correct, v.interpreter_verified = UNVERIFIABLE, "static_checks_skipped", None, False
        v.speedup = v.speedup_compile = v.sol = None
        v.diagnostics += ("\nthe candidate passed, but the static anti-hack checks were skipped "
                          "(AMDKV_UNSAFE_SKIP_STATIC_CHECKS=1, test only): not a verified pass")


def detect_language(source: str) -> str:
    """`hip` for load_inline/HIP sources, `triton` otherwise (the two languages we verify)."""
    words = static_checks.mentions(source, ("load_inline", "triton", "jit"))
    if "load_inline" in words or "__global__" in source:
        return "hip"
    return "triton"


class Verifier(ReferencesMixin, JudgingMixin, SpeedMixin, LocalVerifier):
    """Verifies candidates on one device, in warm worker processes started ahead.

    `Verifier(config)` with a `VerifierConfig`, or `Verifier("cpu", trials=2, ...)`: a device and
    any config fields on top of `VerifierConfig.from_env()`. `platform` (already detected, e.g. by
    `open_verifier`) avoids detecting it again; `device_index` picks the GPU (one Verifier per GPU:
    see scheduler.py). `submit` runs up to `config.jobs` verifications at once. Use as a context
    manager (or call `close()`) so worker processes and threads are cleaned up.
    """

    def __init__(self, config: VerifierConfig | str | None = None, *, platform: PlatformInfo | None = None,
                 device_index: int = 0, **settings: Any) -> None:
        config = resolve_config(config, **settings)
        platform = platform or detect_platform(config.device, device_index)
        self.sandbox_status = sandbox_status(config)  # before any worker starts: `require` may refuse
        super().__init__(config, platform, _describe_device(platform))
        self.reference_runs = 0  # reference workers this Verifier started (cache misses)
        spares = config.spares if config.spares is not None else config.jobs
        self.pool = SparePool(platform, config, size=spares)
        if spares and fork_server.start_method(config.spare_start) == "fork":
            with contextlib.suppress(InfrastructureError):  # no server: the spares run exec'd, nothing to own
                fork_server.shared({"TRITON_INTERPRET": "1"} if platform.interpreter else {}).own(self._scratch)
        self._gpu_spec = spec_for_device_name(self.device_description) if platform.can_time else None
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._busy = BusySpares()  # the workers running now, for cancel()

    # ---------------------------------------------------------------------------- settings
    @property
    def trials(self) -> int:
        return self.config.trials

    @property
    def timeout(self) -> float:
        return self.config.timeout_for(self.platform.interpreter)

    @property
    def archs(self) -> tuple[str, ...]:
        return self.config.archs

    @property
    def time_performance(self) -> bool:
        return self.config.time_performance and self.platform.can_time

    @property
    def compile_baseline(self) -> bool:
        return self.config.compile_baseline

    @property
    def _device_desc(self) -> str:  # the name the reference cache keys use
        return self.device_description

    # ---------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        self._stop_executor(wait=True)
        self.pool.close()
        super().close()

    def _stop_executor(self, wait: bool) -> None:
        """No new run starts on this verifier's threads; `wait`: until the queued and running ones end.
        Queued work is never cancelled (a cancelled future has no verdict): after cancel() each run
        sees the cancellation at its start (_run) and returns `verifier_closed` at once."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=wait, cancel_futures=False)

    def cancel(self) -> None:
        """Stop now (BaseVerifier.cancel): queued work ends `verifier_closed` as it is reached, the
        candidate and reference workers running are killed, and nothing waits for them. What the killed work's threads
        still return is `infra_error` / `verifier_closed`, so no verdict of a killed worker reaches
        the verdict cache or a caller as the candidate's. HIP builds in flight (compiler processes)
        run to their end in the background."""
        self._busy.cancel()
        self._stop_executor(wait=False)
        self.pool.close()
        super().close()

    @property
    def cancelled(self) -> bool:
        return self._busy.cancelled

    def _env(self) -> dict[str, Any]:
        from amdkv.env import collect_env

        env = dict(collect_env(with_gpu=self.platform.can_time))
        env.update({"platform": self.platform.name, "device": self.device_description,
                    "trials": self.trials, "base_seed": BASE_SEED, "init_seed": INIT_SEED,
                    "judge_device": self.judge_device or "cpu", "verifier_identity": self.identity,
                    "policy": self.config.policy, "sandbox": dict(self.sandbox_status),
                    "static_checks": STATIC_CHECKS_SKIPPED if self.config.unsafe_skip_static_checks else "on"})
        return env

    # ---------------------------------------------------------------------------- running
    def _start(self, task: Task, candidate: Candidate, deadline: float | None) -> "Future[Verdict]":
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.config.jobs,
                                                    thread_name_prefix=f"amdkv-verify-{self.platform.name}")
            return self._executor.submit(self._run, task, candidate, deadline)

    def _run_inline(self, task: Task, candidate: Candidate) -> Verdict:
        return self._run(task, candidate, None)

    def _run(self, task: Task, candidate: Candidate, deadline: float | None) -> Verdict:
        if self.cancelled:
            return self.closed_verdict(task, candidate)
        if deadline_passed(deadline):
            return self.infra_verdict(task, candidate, "not started before the caller's deadline",
                                      reason=NOT_STARTED_BEFORE_DEADLINE)
        try:
            verdict = self.verify_now(task, candidate)
        except Exception as exc:  # noqa: BLE001 - a harness bug is an infra_error, never the candidate's
            verdict = self.infra_verdict(task, candidate, exc)
        return self.closed_verdict(task, candidate) if self.cancelled else verdict

    def verify_now(self, task: Task, candidate: Candidate) -> Verdict:
        """Verify in the calling thread, without the cache (the scheduler's GPU threads call this)."""
        t_start = time.monotonic()
        lang = candidate.language if candidate.language != "auto" else (
            self._task_language(task) or detect_language(candidate.source))
        env = self._env()
        env.update({"task_source_hash": task.source_hash, "suite": task.suite,
                    "suite_version": task.metadata.get("suite_version")})
        verdict = Verdict(status=OK, task_id=task.id, language=lang, platform=self.platform.name,
                          device=self.device_description, env=env, candidate_sha256=candidate.sha256)
        spec = program_spec(task)
        if spec:  # the candidate's part of a program (verify/program.py); the verdict keeps the text's hash
            candidate = dataclasses.replace(candidate, source=candidate_part(spec, candidate.source))
        try:
            self._check_disk()  # a full disk writes outputs and kernels short: infra_error, never the candidate's
            with self.candidate_file(candidate, program_text(spec, candidate.source) if spec else None) as cand_path:
                self._verify_into(verdict, task, cand_path, candidate, lang)
        except ReferenceFailed as exc:
            if task.metadata.get("reference_failure") != "unverifiable":
                raise
            if exc.timed_out:  # this run's limit, not the benchmark's code failing: said apart
                verdict.status, verdict.reason = UNVERIFIABLE, REFERENCE_TIMEOUT
                verdict.diagnostics += (f"\nthe task's reference (the benchmark's own code) ran past this run's reference "
                                        f"timeout ({self.reference_timeout_s:g} s; "
                                        f"raise AMDKV_REFERENCE_TIMEOUT): {exc.message}")
            else:
                verdict.status, verdict.reason = UNVERIFIABLE, "reference_failed"
                verdict.diagnostics += f"\nthe task's reference (the benchmark's own code) fails on this platform: {exc.message}"
        except InfrastructureError as exc:
            verdict.status, verdict.reason = INFRA_ERROR, exc.verdict_reason
            verdict.diagnostics += f"\n[infra] {exc}"
        if self.config.unsafe_skip_static_checks:
            never_ok_without_static_checks(verdict)
        verdict.timings["total_s"] = round(time.monotonic() - t_start, 3)
        verdict.diagnostics = verdict.diagnostics.strip()
        return verdict.enforce_invariants()

    # ---------------------------------------------------------------------------- steps
    def _verify_into(self, v: Verdict, task: Task, cand_path: Path, candidate: Candidate, lang: str) -> None:
        source = candidate.source
        blocked = self._unverifiable_here(task)
        if blocked:
            return self.finish(v, UNVERIFIABLE, blocked[0], diag=blocked[1])
        if lang == "hip":
            return self._verify_hip(v, task, cand_path, source)
        # 1. static checks
        if self.static_gate(v, task, source, lang, candidate.label):
            return None
        # 2. what the platform cannot judge
        unjudgeable: str | None = None
        if self.platform.interpreter:
            unsupported = [INTERPRETER_UNSUPPORTED[w] for w in
                           static_checks.mentions(source, tuple(INTERPRETER_UNSUPPORTED))]
            if "bf16" in task.dtypes:
                unsupported.insert(0, "bf16_on_interpreter")
            if unsupported:
                diag = (f"the Triton CPU interpreter cannot judge this ({', '.join(sorted(set(unsupported)))}); "
                        "verify on a GPU platform")
                if not self.archs:
                    return self.finish(v, UNVERIFIABLE, unsupported[0], diag=diag)
                # With AMD targets asked for, still run it under the interpreter: its numbers mean
                # nothing, but its launches give the signatures the AMD compile needs.
                unjudgeable = unsupported[0]
                v.diagnostics += "\n" + diag + " (run only to capture kernels for the AMD compile)"
        # 3 + 4. reference (cached or computed) in parallel with the candidate's spare starting

        def bf16_references(refs: dict[str, dict[str, Any]]) -> bool:
            """True when the interpreter cannot judge these references' bfloat16 (verdict decided)."""
            nonlocal unjudgeable
            if self.platform.interpreter and unjudgeable is None:
                bf16 = [c for c, r in refs.items() if "bfloat16" in r["report"].input_dtypes
                        + r["report"].output_dtypes]
                if bf16:
                    diag = (f"case(s) {bf16} use bfloat16, which the Triton interpreter computes wrongly; "
                            "verify on a GPU platform")
                    if not self.archs:
                        self.finish(v, UNVERIFIABLE, "bf16_on_interpreter", diag=diag)
                        return True
                    unjudgeable = "bf16_on_interpreter"
                    v.diagnostics += "\n" + diag + " (run only to capture kernels for the AMD compile)"
            return False

        spec = program_spec(task)
        extra = BackendJobPart(trusted_from_line=trusted_first_line(spec, source)) if spec else None
        # 5. judge
        judged, report = self.run_and_judge(v, task, cand_path, extra, bf16_references)
        if not judged:
            return None
        if unjudgeable and v.status not in (HACK_DETECTED, COMPILE_ERROR, INFRA_ERROR):
            # Cheating and unbuildable code are facts on any platform; numbers here are not.
            v.status, v.reason, v.correct, v.interpreter_verified = UNVERIFIABLE, unjudgeable, None, False
            v.speedup = v.speedup_compile = v.sol = None
        # 6. AMD compiles of captured kernels
        captures = report.result.captures if report is not None and isinstance(report.result, CandidateResult) else []
        if self.archs and v.status in (OK, MISMATCH, UNVERIFIABLE) and captures:
            self._amd_compile(v, cand_path, captures)

    def run_and_judge(self, v: Verdict, task: Task, cand_path: Path, extra_job: BackendJobPart | None = None,
                      check_references: Callable[[dict[str, dict[str, Any]]], bool] | None = None,
                      ) -> tuple[bool, WorkerReport | None]:
        """The run-and-judge path every language shares (backend_api.RunAndJudge): the cases this
        platform runs, their references (cached or computed) while a spare worker is taken, one run
        of the candidate (`extra_job`: what the backend hands the worker), then judging. Returns
        `(judged, report)`; judged is False when the verdict was decided before the candidate ran
        (no cases here, or `check_references(refs)` returned True after deciding it)."""
        cases = self._select_cases(task)
        if not cases:
            self.finish(v, UNVERIFIABLE, "no_cases_for_platform", diag=f"task {task.id} has no cases this platform runs")
            return False, None
        leases = Leases()  # the cached references this verification uses stay until it is judged
        with contextlib.ExitStack() as held:  # until judged: the leases, and the disk admission (released first)
            held.callback(leases.release)
            spare = self._take_spare(v)
            try:
                t0 = time.monotonic()
                refs = self._references(task, cases, leases)
                v.timings["reference_s"] = round(time.monotonic() - t0, 3)
                v.timings.update(self.computed_reference_timings(refs))
                if check_references is not None and check_references(refs):
                    return False, None
                # room on the disk for its outputs beside the candidates running (disk_admission.py),
                # held until it is judged (the judge keeps the outputs mapped)
                sizes = expected_file_sizes(refs)
                calls = checked_calls_bytes(refs, timed_calls=spare.device != "cpu")
                need = candidate_disk_need(sizes, calls) + handed_copy_bytes(
                    [str(r["files"].inputs) for r in refs.values()], spare.in_dir)
                waited = held.enter_context(ADMISSION.admitted(
                    spare.workdir, need, int(self.config.min_free_disk_gib * 2 ** 30),
                    cancelled=lambda: self._busy.cancelled,
                    reclaim=self.reclaimer(spare.workdir, lambda freed: add_reclaimed(v.timings, freed))))
                if waited >= 0.01:
                    v.timings["disk_wait_s"] = round(waited, 3)
                spare = self._spare_for_file_need(v, spare, candidate_file_need(sizes))
                t0 = time.monotonic()
                with self._busy.using(spare):
                    report, outputs, load_error, proc = self._run_candidate(spare, task, cand_path, cases, refs,
                                                                            extra_job)
                v.timings["candidate_s"] = round(time.monotonic() - t0, 3)
                over = over_reservation(spare.root, need)
                if over:
                    v.timings["disk_over_reservation_mib"] = round(over / 2 ** 20, 3)
                    _LOG.warning("task %s: the candidate's folder holds %.2f GiB more than its disk reservation "
                                 "(%.2f GiB): candidates beside it may meet a full disk", task.id, over / 2 ** 30,
                                 need / 2 ** 30)
            finally:
                spare.cleanup()
            self._judge(v, task, cases, refs, report, outputs, load_error, proc)
            del outputs  # its files' space comes back when their mappings go
        if self.config.share_triton_launchers and report is not None and isinstance(report.result, CandidateResult):
            from amdkv.verify.triton_launchers import library_for

            library_for(str(self.config.cache_path)).offer(report.result.launcher_signatures)
        return True, report

    def static_gate(self, v: Verdict, task: Task, source: str, language: str, label: str) -> bool:
        """Static checks of the candidate's own text (every language); True when they decided the
        verdict. A program task (verify/program.py) supplies `ModelNew` itself, so the candidate is
        checked for the program rules instead of for `ModelNew` and its signature."""
        t0 = time.monotonic()
        spec = program_spec(task)
        findings = static_checks.check_source(source, language=language, filename=label,
                                              extra_imports=allowed_imports(spec))
        v.timings["static_s"] = round(time.monotonic() - t0, 3)
        if any(f.code == static_checks.SYNTAX_ERROR for f in findings):
            self.finish(v, COMPILE_ERROR, "syntax_error", compiled=False, diag="\n".join(map(str, findings)))
            return True
        if spec is not None:
            findings += program_findings(spec, source)
        elif not static_checks.has_model_new(source):
            # no path in the text: the verdict cache hands this verdict to later submitters of the
            # same source under other paths (and to `amdkv serve` clients), where it would name a stranger's file
            self.finish(v, COMPILE_ERROR, "no_model_new", compiled=False,
                        diag="the candidate defines no top-level class `ModelNew`")
            return True
        else:
            want = static_checks.forward_parameters(task.source, "Model")
            got = static_checks.forward_parameters(source, "ModelNew")
            if want is not None and got is not None and "*" not in got and len(want) != len(got):
                self.finish(v, COMPILE_ERROR, "signature_mismatch", compiled=False,
                            diag=f"ModelNew.forward takes {len(got)} argument(s) {got}; the task's "
                                 f"Model.forward takes {len(want)} {want}")
                return True
        exempt = POLICY_EXEMPT_STATIC[self.config.policy]
        if self.config.unsafe_skip_static_checks:  # test only: what the OS sandbox stops on its own
            exempt = None
        findings = [f for f in findings if exempt is not None and f.code not in exempt]
        if findings:
            v.hack_findings = [str(f) for f in findings]
            self.finish(v, HACK_DETECTED, findings[0].code, diag="\n".join(map(str, findings)))
            return True
        return False

    def _task_language(self, task: Task) -> str | None:
        """The language a task requires of its candidates (`metadata["language"]`, e.g. HIP for
        PyTorch-to-HIP), except under the `reference` policy, whose candidate is plain PyTorch."""
        if self.config.policy == "reference":
            return None
        return task.metadata.get("language")

    def _unverifiable_here(self, task: Task) -> tuple[str, str] | None:
        """(reason, why) when the task says this platform cannot judge it (`metadata["unverifiable"]`:
        {platform or "*": {"reason": code, "why": text}}), e.g. a benchmark test that needs a GPU."""
        table = task.metadata.get("unverifiable") or {}
        entry = table.get(self.platform.name) or table.get("*")
        return (entry["reason"], entry["why"]) if entry else None

    def _select_cases(self, task: Task) -> list[Any]:
        if self.platform.interpreter:
            return task.cases_tagged("correctness")
        return [c for c in task.cases if c.is_correctness or (c.is_performance and self.time_performance)]


    def _run_candidate(self, spare: Spare, task: Task, cand_path: Path, cases: list[Any],
                       refs: dict[str, dict[str, Any]], extra_job: BackendJobPart | None = None,
                       ) -> tuple[WorkerReport | None, dict[str, Any] | None, str | None, Any]:
        """One run of the candidate in `spare`: (its report, its outputs, why the outputs could not
        be loaded, the process result). Report and outputs are None when the worker wrote none."""
        report_path = os.path.join(spare.workdir, "candidate_report.json")
        outputs_path = os.path.join(spare.workdir, "candidate_outputs.pt")
        # The candidate may read exactly its inputs files (not the expected outputs beside them,
        # nor anything else in the cache) and its own text, handed into the worker's read-only
        # folder (its OS sandbox was set up before the job was known); it may write only in its
        # own work dir.
        cjobs = [CandidateCaseJob(name=case.name, recheck=True, time=bool(refs[case.name]["timed"]),
                                  inputs_file=spare.hand(refs[case.name]["files"].inputs, f"inputs-{i}.pt"),
                                  flush_bytes=flush_bytes(self._gpu_spec))
                 for i, case in enumerate(cases)]
        handed_path = spare.hand(cand_path)
        readable = [c.inputs_file for c in cjobs]
        if extra_job is not None:  # language backends (HIP: prebuilt extensions, handed to the worker like the inputs)
            extra_job = extra_job.handed(spare.hand)
            readable.append(spare.in_dir)
        floor = candidate_floor_bytes([refs[case.name]["report"].gpu_need_bytes for case in cases])
        job = CandidateJob(candidate_path=handed_path, device=spare.device,
                           interpreter=self.platform.interpreter, cases=cjobs, out_dir=spare.workdir,
                           outputs_path=outputs_path, report_path=report_path, readable=readable,
                           capture=bool(self.archs), backend=extra_job, gpu_mem_floor_bytes=floor)
        wall0 = time.monotonic()
        proc = spare.run(job, timeout=self.timeout, label=f"candidate {task.id}")
        proc.gpu_mem_floor_bytes = floor  # type: ignore[attr-defined]
        proc.parent_wall_s = time.monotonic() - wall0  # type: ignore[attr-defined]
        # parts of candidate_s, put in the verdict by _judge (every language's path judges through it)
        handoffs = proc.handoff_timings = {"spare_ready_wait_s": spare.ready_wait_s}  # type: ignore[attr-defined]
        proc.spare_start = spare.start_method + (" (fork failed)" if spare.fork_failure else "")  # type: ignore[attr-defined]
        load0 = time.monotonic()
        # a report without a field (or truncated) raises here: a harness failure, infra_error
        report = WorkerReport.from_json(Path(report_path).read_text()) if os.path.isfile(report_path) else None
        outputs, load_error = None, None
        if report is not None and report.fatal is None and os.path.isfile(outputs_path):
            try:
                outputs = resolve_spilled(load_tensor_file(outputs_path), spill_folder_for(outputs_path),
                                          load_tensor_file)
            except Exception as exc:  # noqa: BLE001 - anything but plain tensors is refused
                load_error = f"{type(exc).__name__}: {exc}"[:500]
        handoffs["outputs_load_s"] = time.monotonic() - load0
        if report and spare.job_sent_at and spare.done_seen_at and report.job_received_at:
            # sent -> the worker has the job; report written -> the parent saw DONE (pool.Spare.run)
            handoffs["job_handoff_s"] = report.job_received_at - spare.job_sent_at
            handoffs["done_handoff_s"] = spare.done_seen_at - report.reported_at
        return report, outputs, load_error, proc


    def _spare_for_file_need(self, v: Verdict, spare: Spare, need: int | None) -> Spare:
        """`spare`, or, when the task's outputs need a larger file (`need`: disk_admission.candidate_file_need)
        than its per-file limit allows, a worker started with that limit in its place: a correct kernel
        is never `infra_error` for writing its own task's outputs. The verdict's timing names the limit
        (`file_limit_gib`)."""
        limit = getattr(spare.sandbox, "file_size_bytes", None)
        if limit is None or need is None or need <= limit:
            return spare
        spare.discard()
        v.timings["file_limit_gib"] = round(need / 2 ** 30, 3)
        return self.pool.start_with_file_limit(need)

    def _take_spare(self, v: Verdict) -> Spare:
        """A warm worker for the candidate; the wait (0 when a spare was ready) goes in the verdict."""
        t0 = time.monotonic()
        spare = self.pool.take()
        v.timings["spare_wait_s"] = round(time.monotonic() - t0, 3)
        return spare



    # ---------------------------------------------------------------------------- other languages
    def _verify_hip(self, v: Verdict, task: Task, cand_path: Path, source: str) -> None:
        if not self.platform.interpreter:  # GPUs: build and run it (backends/hip_gpu.py)
            from amdkv.verify.backends.hip_gpu import verify_hip_on_gpu
            return verify_hip_on_gpu(self, v, task, cand_path, source)
        try:
            from amdkv.verify.backends import hip as hip_backend
        except ImportError as exc:
            return self.finish(v, UNVERIFIABLE, "hip_backend_unavailable", diag=str(exc))
        fields = hip_backend.verify_hip_compile_only(task.path, str(cand_path), archs=self.archs or ("gfx942",),
                                                     start=self.config.spare_start, sandbox=self.config.sandbox)
        for key, value in fields.items():
            if key == "resources":
                v.resources = [ArchResources(**r) if isinstance(r, dict) else r for r in value]
            elif hasattr(v, key):
                setattr(v, key, value)

    def _amd_compile(self, v: Verdict, cand_path: Path, captures: list[dict[str, Any]]) -> None:
        try:
            from amdkv.verify.amd.compile import compile_triton_for_amd
        except ImportError as exc:
            v.diagnostics += f"\n[amd] AMD compile layer unavailable: {exc}"
            return
        # Launches made while an autotuner benchmarks its configs describe no chosen kernel.
        captures = [c for c in captures if (c.get("autotune_config") or {}).get("phase") != "bench"]
        t0 = time.monotonic()
        res = compile_triton_for_amd(str(cand_path), captures, archs=self.archs, start=self.config.spare_start,
                                     sandbox=self.config.sandbox)
        v.timings["amd_compile_s"] = round(time.monotonic() - t0, 3)
        v.resources = [ArchResources(**r) if isinstance(r, dict) else r for r in res]
        if v.resources and not all(r.compiled for r in v.resources):
            failed = [f"{r.kernel}@{r.arch}: {r.error}" for r in v.resources if not r.compiled]
            v.compiled = False
            v.diagnostics += "\n[amd] " + "\n".join(failed)


def verify_files(task_path: str, candidate_path: str, device: str = "auto", **settings: Any) -> Verdict:
    """One-shot convenience: verify one candidate file against one task file."""
    with Verifier(device, spares=0, **settings) as verifier:
        return verifier.verify(task_path, candidate_path)


def _describe_device(platform: PlatformInfo) -> str:
    if not platform.can_time:
        return "cpu-interpreter"
    import torch

    return torch.cuda.get_device_name(torch.device(platform.device))


