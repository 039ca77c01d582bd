"""The verifier: one candidate against one task on one platform -> one `Verdict`.

Order of work (cheap and decisive first):
 1. read the candidate; static AST checks in this (trusted) process;
 2. platform limits (bf16 / libdevice / inline asm on the CPU interpreter -> `unverifiable`);
 3. reference outputs from the cache, or from a reference worker (in parallel with step 4);
 4. the candidate in a fresh spare worker, with runtime guards, under a timeout;
 5. comparison here, in the parent, against eager and float64-golden references;
 6. on GPUs, timings -> speedup and sol; with `archs`, AMD compiles of the captured kernels.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from amdkv.config import VerifierConfig, resolve_config
from amdkv.errors import InfrastructureError
from amdkv.tasks.types import Task
from amdkv.verify import fork_server, os_sandbox, static_checks
from amdkv.verify.api import LocalVerifier, deadline_passed
from amdkv.verify.candidate import Candidate
from amdkv.verify.compare import bitwise_equal, compare_case, compare_rule, to_device
from amdkv.verify.file_lock import exclusive_file_lock
from amdkv.verify.gpu_specs import flush_bytes, spec_for_device_name, time_floor_ms
from amdkv.verify.platform import PlatformInfo, detect_platform
from amdkv.verify.pool import Spare, SparePool, gpu_lock_key
from amdkv.verify.program import (allowed_imports, candidate_part, program_findings, program_spec,
                                  program_text, trusted_first_line)
from amdkv.verify.reference_cache import CaseFiles, case_key
from amdkv.verify.timing import check_consistency as check_timing_consistency
from amdkv.verify.timing import timing_lock_path
from amdkv.verify.verdict import (COMPILE_ERROR, HACK_DETECTED, INFRA_ERROR, MISMATCH, OK, RUNTIME_ERROR,
                                  TIMEOUT, UNVERIFIABLE, ArchResources, CaseResult, Verdict, compiled_after,
                                  worst_status)

# Reasons that mean "the candidate file is not a candidate at all" (the CLI exits 2 on these).
BAD_INPUT_REASONS = frozenset({"no_model_new", "signature_mismatch", "unreadable_candidate"})
# Findings that are not cheating but make the interpreter unable to judge the candidate.
INTERPRETER_UNSUPPORTED = {"bfloat16": "bf16_on_interpreter", "libdevice": "libdevice_on_interpreter",
                           "inline_asm_elementwise": "inline_asm_on_interpreter"}
# Findings of the candidate's worker that mean a broken kernel, not a cheat: guard bytes next to
# an input overwritten, an interpreted access outside every tensor argument (interpreter_bounds.py).
RUNTIME_ERROR_FINDINGS = frozenset({"out_of_bounds_write", "out_of_bounds_access"})
# Static finding codes each policy does not act on (config.POLICIES; None: every anti-hack finding).
# `reference` runs a benchmark's plain-PyTorch reference as a candidate (a sanity run): only the
# rules that refuse PyTorch doing the work are off. `benchmark` applies the benchmark's own rule.
POLICY_EXEMPT_STATIC: dict[str, frozenset[str] | None] = {
    "strict": frozenset(), "reference": frozenset({"torch_fallback", "no_kernel"}), "benchmark": None}
# Dynamic (in-worker) witnesses a policy does not act on; None: every one.
POLICY_EXEMPT_DYNAMIC: dict[str, frozenset[str] | None] = {
    "strict": frozenset(), "reference": frozenset({"torch_compute_in_forward", "no_kernel_launch"}),
    "benchmark": None}
DEFAULT_TRIALS = 3
BASE_SEED = 1234
INIT_SEED = 42


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


class ReferenceFailed(InfrastructureError):
    """The task's reference could not be computed. For tasks whose reference is a benchmark's own
    kernel (`metadata["reference_failure"] == "unverifiable"`) that makes the task unverifiable on
    this platform; for a PyTorch reference it stays a harness failure (infra_error)."""


def detect_language(source: str) -> str:
    """`hip` for load_inline/HIP sources, `triton` otherwise (the two languages we verify)."""
    words = static_checks.mentions(source, ("load_inline", "triton", "jit"))
    if "load_inline" in words or "__global__" in source:
        return "hip"
    return "triton"


class Verifier(LocalVerifier):
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
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=False)
        self.pool.close()
        super().close()

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
        if deadline_passed(deadline):
            return self.infra_verdict(task, candidate, "not started before the caller's deadline",
                                      reason="not_started_before_deadline")
        try:
            return self.verify_now(task, candidate)
        except Exception as exc:  # noqa: BLE001 - a harness bug is an infra_error, never the candidate's
            return self.infra_verdict(task, candidate, exc)

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
            with self.candidate_file(candidate, program_text(spec, candidate.source) if spec else None) as cand_path:
                self._verify_into(verdict, task, cand_path, candidate, lang)
        except ReferenceFailed as exc:
            if task.metadata.get("reference_failure") != "unverifiable":
                raise
            verdict.status, verdict.reason = UNVERIFIABLE, "reference_failed"
            verdict.diagnostics += f"\nthe task's reference (the benchmark's own code) fails on this platform: {exc.message}"
        except InfrastructureError as exc:
            verdict.status, verdict.reason = INFRA_ERROR, "harness_failure"
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
                bf16 = [c for c, r in refs.items() if "bfloat16" in r["report"]["input_dtypes"]
                        + r["report"]["output_dtypes"]]
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
        extra = {"trusted_code": {"from_line": trusted_first_line(spec, source)}} if spec else None
        # 5. judge
        judged, report = self.run_and_judge(v, task, cand_path, extra, bf16_references)
        if not judged:
            return None
        if unjudgeable and v.status not in (HACK_DETECTED, COMPILE_ERROR, INFRA_ERROR):
            # Cheating and unbuildable code are facts on any platform; numbers here are not.
            v.status, v.reason, v.correct, v.interpreter_verified = UNVERIFIABLE, unjudgeable, None, False
            v.speedup = v.speedup_compile = v.sol = None
        # 6. AMD compiles of captured kernels
        if self.archs and v.status in (OK, MISMATCH, UNVERIFIABLE) and report and report.get("captures"):
            self._amd_compile(v, cand_path, report["captures"])

    def run_and_judge(self, v: Verdict, task: Task, cand_path: Path, extra_job: dict[str, Any] | None = None,
                      check_references: Callable[[dict[str, dict[str, Any]]], bool] | None = None,
                      ) -> tuple[bool, dict | None]:
        """The run-and-judge path every language shares (backend_api.RunAndJudge): the cases this
        platform runs, their references (cached or computed) while a spare worker is taken, one run
        of the candidate (`extra_job`: what the backend hands the worker), then judging. Returns
        `(judged, report)`; judged is False when the verdict was decided before the candidate ran
        (no cases here, or `check_references(refs)` returned True after deciding it)."""
        cases = self._select_cases(task)
        if not cases:
            self.finish(v, UNVERIFIABLE, "no_cases_for_platform", diag=f"task {task.id} has no cases this platform runs")
            return False, None
        spare = self._take_spare(v)
        try:
            t0 = time.monotonic()
            refs = self._references(task, cases)
            v.timings["reference_s"] = round(time.monotonic() - t0, 3)
            if check_references is not None and check_references(refs):
                return False, None
            t0 = time.monotonic()
            report, outputs, proc = self._run_candidate(spare, task, cand_path, cases, refs, extra_job)
            v.timings["candidate_s"] = round(time.monotonic() - t0, 3)
        finally:
            spare.cleanup()
        self._judge(v, task, cases, refs, report, outputs, proc)
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
            self.finish(v, COMPILE_ERROR, "no_model_new", compiled=False,
                        diag=f"{label} defines no top-level class `ModelNew`")
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

    def _trials_for(self, case: Any) -> int:
        return self.trials if case.is_correctness else 1

    def _references(self, task: Task, cases: list[Any]) -> dict[str, dict[str, Any]]:
        """Reference files per case name, computing the missing ones in a reference worker.

        Several candidates of one task are often verified at once (an eval's samples are adjacent):
        they wait for one reference computation instead of each starting their own.
        """
        lock_key = (task.source_hash, self._device_desc, self.trials, self.time_performance, self.compile_baseline)
        with _reference_lock(lock_key):
            failed = _REFERENCE_FAILURES.get(lock_key)
            if failed is not None:  # computed (and failed) for an earlier candidate of this task
                raise ReferenceFailed(failed)
            try:
                return self._references_locked(task, cases)
            except ReferenceFailed as exc:
                # Only a benchmark's own reference kernel that cannot run on this platform is
                # remembered; a PyTorch reference that failed (overload, a timeout) is retried by the
                # next candidate, or a long-running service would refuse that task forever.
                if task.metadata.get("reference_failure") == "unverifiable":
                    _REFERENCE_FAILURES[lock_key] = str(exc)
                raise

    def _references_locked(self, task: Task, cases: list[Any]) -> dict[str, dict[str, Any]]:
        refs: dict[str, dict[str, Any]] = {}
        missing = []
        for case in cases:
            seeds = [BASE_SEED + i for i in range(self._trials_for(case))]
            timed = self.time_performance and case.is_performance
            key = case_key(task.source_hash, case.name, seeds, INIT_SEED, self._device_desc,
                           timed and (self.compile_baseline or "eager-only"), True)
            files = CaseFiles(key, self.config.cache_path)
            refs[case.name] = {"files": files, "seeds": seeds, "timed": timed}
            if files.complete():
                refs[case.name]["report"] = files.read_report()
            else:
                missing.append(case)
        if missing:
            self.reference_runs += 1
            self._compute_references(task, missing, refs)
        return refs

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
            jobs.append({"name": case.name, "seeds": r["seeds"], "init_seed": INIT_SEED,
                         "inputs_file": os.path.join(tmp_dir, "inputs.pt"),
                         "expected_file": os.path.join(tmp_dir, "expected.pt"),
                         "golden": bool(task.metadata.get("golden", True)), "time": r["timed"],
                         "flush_bytes": flush_bytes(self._gpu_spec),
                         "compile_baseline": self.compile_baseline})
        for folder in compile_env.values():
            os.makedirs(folder, exist_ok=True)
        # the reference worker reads its task's folder (trusted code: a task may import what lies beside
        # it, as a benchmark task's program does) and writes only its cases' files and the shared caches
        spare = Spare(self.platform, self.config, extra_env=compile_env, readable=[os.path.dirname(task.path)],
                      writable=[refs[c.name]["tmp"] for c in cases] + list(compile_env.values()))
        try:
            report_path = os.path.join(spare.workdir, "reference_report.json")
            job = {"kind": "reference", "task_path": task.path, "device": spare.device,
                   "cases": jobs, "report_path": report_path}
            proc = spare.run(job, timeout=max(self.timeout, 300.0))
            if proc.timed_out or not os.path.isfile(report_path):
                raise ReferenceFailed(
                    f"the reference for task {task.id} failed (rc {proc.returncode}, "
                    f"{'timed out' if proc.timed_out else 'no report'}): {proc.stderr[-1500:]}",
                    hint="the task file itself is broken or the machine is overloaded")
            report = json.loads(Path(report_path).read_text())
            if report.get("fatal"):
                raise ReferenceFailed(f"the reference for task {task.id} raised "
                                          f"{report['error_type']}: {report['error']}\n{report['traceback']}",
                                          hint="fix the task file (it is trusted code)")
            for crep in report["cases"]:
                r = refs[crep["name"]]
                files: CaseFiles = r["files"]
                os.replace(os.path.join(r["tmp"], "inputs.pt"), files.inputs)
                os.replace(os.path.join(r["tmp"], "expected.pt"), files.expected)
                os.rmdir(r["tmp"])
                files.write_report(crep)
                r["report"] = crep
        finally:
            spare.cleanup()

    def _run_candidate(self, spare: Spare, task: Task, cand_path: Path, cases: list[Any],
                       refs: dict[str, dict[str, Any]],
                       extra_job: dict[str, Any] | None = None) -> tuple[dict | None, dict | None, Any]:
        report_path = os.path.join(spare.workdir, "candidate_report.json")
        outputs_path = os.path.join(spare.workdir, "candidate_outputs.pt")
        # The candidate may read exactly its inputs files (not the expected outputs beside them,
        # nor anything else in the cache) and its own text, handed into the worker's read-only
        # folder (its OS sandbox was set up before the job was known); it may write only in its
        # own work dir.
        cjobs = []
        for i, case in enumerate(cases):
            r = refs[case.name]
            cjobs.append({"name": case.name, "inputs_file": spare.hand(r["files"].inputs, f"inputs-{i}.pt"),
                          "recheck": True, "time": bool(r["timed"]), "flush_bytes": flush_bytes(self._gpu_spec)})
        cand_path = Path(spare.hand(cand_path))
        job = {"kind": "candidate", "candidate_path": str(cand_path), "device": spare.device,
               "interpreter": self.platform.interpreter, "cases": cjobs, "out_dir": spare.workdir,
               "outputs_path": outputs_path, "report_path": report_path,
               "readable": [c["inputs_file"] for c in cjobs], "capture": bool(self.archs)}
        if extra_job:  # language backends (HIP: prebuilt extensions, handed to the worker like the inputs)
            job.update(extra_job)
            for build in job.get("hip_prebuilt") or []:
                build["so_path"] = spare.hand(build["so_path"])
            job["readable"].append(spare.in_dir)
        wall0 = time.monotonic()
        proc = spare.run(job, timeout=self.timeout)
        proc.parent_wall_s = time.monotonic() - wall0  # type: ignore[attr-defined]
        # parts of candidate_s, put in the verdict by _judge (every language's path judges through it)
        handoffs = proc.handoff_timings = {"spare_ready_wait_s": spare.ready_wait_s}  # type: ignore[attr-defined]
        proc.spare_start = spare.start_method + (" (fork failed)" if spare.fork_failure else "")  # type: ignore[attr-defined]
        load0 = time.monotonic()
        report = json.loads(Path(report_path).read_text()) if os.path.isfile(report_path) else None
        outputs = None
        if report is not None and not report.get("fatal") and os.path.isfile(outputs_path):
            try:
                outputs = load_tensor_file(outputs_path)
            except Exception as exc:  # noqa: BLE001 - anything but plain tensors is refused
                report.setdefault("load_error", f"{type(exc).__name__}: {exc}"[:500])
        handoffs["outputs_load_s"] = time.monotonic() - load0
        if report and spare.job_sent_at and spare.done_seen_at and report.get("job_received_at"):
            # sent -> the worker has the job; report written -> the parent saw DONE (pool.Spare.run)
            handoffs["job_handoff_s"] = report["job_received_at"] - spare.job_sent_at
            handoffs["done_handoff_s"] = spare.done_seen_at - report["reported_at"]
        return report, outputs, proc

    # ---------------------------------------------------------------------------- judging
    def finish(self, v: Verdict, status: str, reason: str | None, *, compiled: bool | None = None,
               diag: str = "") -> None:
        """Decide the verdict (backend_api.RunAndJudge): status and reason, `correct` from the
        status, `compiled` when the caller knows it, `diag` appended to the diagnostics."""
        v.status, v.reason = status, reason
        if compiled is not None:
            v.compiled = compiled
        if status in (OK,):
            v.correct = True
        elif status in (MISMATCH, HACK_DETECTED, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT):
            v.correct = False
        if diag:
            v.diagnostics += "\n" + diag

    def _judge(self, v: Verdict, task: Task, cases: list[Any], refs: dict[str, dict[str, Any]],
               report: dict | None, outputs: dict | None, proc: Any) -> None:
        """Statuses from the candidate's report and outputs; timed as `judge_s` because it runs in
        this (parent) process for every GPU's candidates, so it bounds the throughput of the host."""
        if getattr(proc, "spare_start", None):  # how the candidate's process was started (fork/exec)
            v.env["spare_start"] = proc.spare_start
        if report is not None and "sandbox" in report:  # what the worker's OS sandbox really held
            v.env["sandbox"] = os_sandbox.summary(report["sandbox"], self.config.sandbox)
        for key, secs in getattr(proc, "handoff_timings", {}).items():  # parts of candidate_s
            v.timings[key] = round(secs, 3)
        t0 = time.monotonic()
        try:
            self._judge_into(v, task, cases, refs, report, outputs, proc)
        finally:
            v.timings["judge_s"] = round(time.monotonic() - t0, 3)

    def _judge_into(self, v: Verdict, task: Task, cases: list[Any], refs: dict[str, dict[str, Any]],
                    report: dict | None, outputs: dict | None, proc: Any) -> None:
        if proc.stdout.strip() or proc.stderr.strip():
            v.diagnostics += f"\n[candidate stderr]\n{proc.stderr[-3000:]}" if proc.stderr.strip() else ""
        if proc.timed_out:
            reason = "interpreter_timeout" if self.platform.interpreter else "wall_timeout"
            return self.finish(v, TIMEOUT, reason, diag=f"the candidate did not finish within {self.timeout:.0f} s")
        if report is None:
            sig = proc.signal_name
            reason = f"crashed:{sig}" if sig else ("process_exited" if proc.returncode == 0 else f"exit_code:{proc.returncode}")
            return self.finish(v, RUNTIME_ERROR, reason, diag=f"the candidate's process died "
                               f"({sig or 'rc ' + str(proc.returncode)}) before reporting")
        if report.get("fatal"):
            raise InfrastructureError(f"worker failed: {report['error_type']}: {report['error']}\n"
                                      f"{report.get('traceback', '')}")
        if report.get("file_violations"):
            v.hack_findings += [f"sandbox: {x}" for x in report["file_violations"]]
            return self.finish(v, HACK_DETECTED, "sandbox_violation",
                               diag="the candidate tried to open files or processes it was not given:\n"
                                    + "\n".join(report["file_violations"][:10]))
        err = report.get("error")
        if err:
            v.compiled = compiled_after(err["status"])
            return self.finish(v, err["status"], err["reason"], diag=f"{err['type']}: {err['message']}\n{err['traceback']}")
        if "load_error" in report or outputs is None:
            return self.finish(v, HACK_DETECTED, "unloadable_outputs",
                               diag=f"the outputs are not plain tensors: {report.get('load_error')}")
        v.compiled = True
        statuses = []
        for case in cases:
            r = refs[case.name]
            crep = next((c for c in report["cases"] if c["name"] == case.name), None)
            cres = CaseResult(name=case.name, tags=list(case.tags), min_bytes=r["report"].get("min_bytes"),
                              flops=case.flops)
            v.cases.append(cres)
            if crep is None:
                cres.status, cres.reason = RUNTIME_ERROR, "not_run"
                statuses.append(RUNTIME_ERROR)
                continue
            if crep.get("error"):
                e = crep["error"]
                cres.status, cres.reason, cres.message = e["status"], e["reason"], f"{e['type']}: {e['message']}"
                statuses.append(e["status"])
                v.diagnostics += f"\n[{case.name}] {e['type']}: {e['message']}\n{e['traceback']}"
                if not compiled_after(e["status"]):
                    v.compiled = False
                continue
            status, reason, message = self._case_runtime_findings(crep)
            if status is None:
                expected = load_tensor_file(r["files"].expected)
                inputs = load_tensor_file(r["files"].inputs)
                t_wait = time.monotonic()
                with judge_slots(self.config.judge_slot_count()):
                    v.timings["judge_wait_s"] = round(v.timings.get("judge_wait_s", 0.0) + time.monotonic() - t_wait, 3)
                    status, reason, message = self._compare_on_judge_device(task, case, cres, expected, inputs,
                                                                            outputs.get(case.name))
            cres.status, cres.reason, cres.message = status, reason, message
            cres.trials = len(r["seeds"])
            statuses.append(status)
            if status == OK and crep.get("timing"):
                self._case_speed(cres, r["report"], crep["timing"], task)
                # the parent cross-checks the child's timing against wall clocks (timing.py)
                bad_timing = check_timing_consistency(crep["timing"], getattr(proc, "parent_wall_s", None))
                if bad_timing and cres.status == OK:
                    cres.status, cres.reason, cres.message = HACK_DETECTED, "timing_inconsistent", bad_timing
        # case statuses may have changed after timing (below_roofline_floor, timing_inconsistent)
        v.status = worst_status(statuses + [c.status for c in v.cases])
        bad = next((c for c in v.cases if c.status == v.status and v.status != OK), None)
        v.reason = bad.reason if bad else None
        if bad and bad.message:
            v.diagnostics += f"\n[{bad.name}] {bad.message}"
        v.correct = v.status == OK if v.status != UNVERIFIABLE else None
        if v.status == HACK_DETECTED:
            v.hack_findings += [f"[{c.name}] {c.reason}: {c.message}" for c in v.cases if c.status == HACK_DETECTED]
        v.interpreter_verified = v.status == OK and self.platform.interpreter
        self._aggregate_speed(v)
        v.timings["worker_startup_s"] = round(report.get("startup_s", 0.0), 3)  # paid before the job (warm spare)
        if report.get("job_s") is not None:  # the job inside the worker; candidate_s minus this = IPC + hand-off
            v.timings["worker_job_s"] = round(report["job_s"], 3)
        for phase, secs in (report.get("phase_s") or {}).items():
            v.timings[f"worker_{phase}_s"] = round(secs, 3)
        for part, secs in (report.get("startup_parts") or {}).items():  # cuda_context_s, ..._cpu_s
            v.timings[f"worker_startup_{part}"] = round(secs, 3)
        for key in ("cpu_s", "job_cpu_s"):  # host CPU of the worker process, gcc/ptxas children included
            if report.get(key) is not None:
                v.timings[f"worker_{key}"] = round(report[key], 3)

    def _take_spare(self, v: Verdict) -> Spare:
        """A warm worker for the candidate; the wait (0 when a spare was ready) goes in the verdict."""
        t0 = time.monotonic()
        spare = self.pool.take()
        v.timings["spare_wait_s"] = round(time.monotonic() - t0, 3)
        return spare

    def _case_runtime_findings(self, crep: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
        exempt = POLICY_EXEMPT_DYNAMIC[self.config.policy]
        if exempt is None:  # `benchmark`: the benchmark's own rule has no runtime witnesses
            return None, None, None
        if crep["findings"]:
            # the most severe finding wins (a cheat is never reported as a mere out-of-bounds bug)
            def status_of(finding: dict[str, Any]) -> str:
                return RUNTIME_ERROR if finding["code"] in RUNTIME_ERROR_FINDINGS else HACK_DETECTED

            status = worst_status([status_of(f) for f in crep["findings"]])
            f = next(f for f in crep["findings"] if status_of(f) == status)
            return status, f["code"], f["message"]
        if crep["compute_ops"] and "torch_compute_in_forward" not in exempt:
            ops = ", ".join(f"{k}×{n}" for k, n in sorted(crep["compute_ops"].items()))
            return HACK_DETECTED, "torch_compute_in_forward", (
                f"PyTorch computed part of the result in forward (aten ops: {ops}); the work must be done "
                "in the candidate's kernels")
        if any(n == 0 for n in crep["launches"]) and "no_kernel_launch" not in exempt:
            return HACK_DETECTED, "no_kernel_launch", "a forward call launched no Triton kernel"
        return None, None, None

    @property
    def judge_device(self) -> str | None:
        """Where this verifier compares outputs: the GPU it verifies on, or None for this process's
        CPU (interpreter platforms; config judge_device=cpu forces it). On a GPU the comparison of a
        64 M-element output takes about a millisecond instead of most of a second of every host core,
        which is what limited two GPUs to 1.1-1.4x one GPU (docs/gpu.md, Throughput)."""
        if self.platform.interpreter or not self.platform.can_time or self.config.judge_device == "cpu":
            return None
        return self.platform.device

    def _compare_on_judge_device(self, task: Task, case: Any, cres: CaseResult, expected: dict[str, Any],
                                 inputs: dict[str, Any], outs: dict[str, Any] | None) -> tuple[str, str | None, str | None]:
        """_compare_case on the judge device. The copies to the GPU overlap other workers' timing
        (they cross PCIe, not the GPU's memory system); the comparison itself holds the GPU's timing
        lock so that it never runs inside another candidate's timed section. Out of GPU memory
        (the candidates own most of it), the same comparison runs on the CPU."""
        dev = self.judge_device
        if dev is None or outs is None:
            return self._compare_case(task, case, cres, expected, inputs, outs)
        import torch

        try:
            g_expected = {"eager": to_device(expected["eager"], dev), "golden": to_device(expected.get("golden"), dev)}
            g_inputs = {"trials": to_device(inputs["trials"], dev), "seeds": inputs["seeds"]}
            g_outs = to_device(outs, dev)
            with exclusive_file_lock(timing_lock_path(gpu_lock_key(dev))):
                return self._compare_case(task, case, cres, g_expected, g_inputs, g_outs)
        except torch.cuda.OutOfMemoryError:
            g_expected = g_inputs = g_outs = None  # release the partial copies before freeing the cache
            torch.cuda.empty_cache()
            return self._compare_case(task, case, cres, expected, inputs, outs)

    def _compare_case(self, task: Task, case: Any, cres: CaseResult, expected: dict[str, Any],
                      inputs: dict[str, Any], outs: dict[str, Any] | None) -> tuple[str, str | None, str | None]:
        if outs is None or len(outs["trials"]) != len(expected["eager"]):
            return RUNTIME_ERROR, "missing_outputs", "the candidate returned no outputs for this case"
        if self.config.policy == "benchmark" and task.metadata.get("benchmark_rule"):
            return self._compare_benchmark_rule(task, expected, inputs, outs)
        comp_args = task.metadata.get("comparator_args")
        golden = expected.get("golden")
        worst_err = 0.0
        calls = list(enumerate(outs["trials"])) + ([(0, outs["recheck"])] if outs.get("recheck") is not None else [])
        n_checked = len(calls)
        if outs.get("post_timing") is not None:  # results re-checked after the timed loop
            calls.append((0, outs["post_timing"]))
        memo: dict[Any, Any] = {}  # eager error / rms per expected output, for this case's comparisons
        for n, (t, cand) in enumerate(calls):
            if n >= len(outs["trials"]) and _same_bits(cand, outs["trials"][t]):
                continue  # bit for bit what passed trial t (the usual case): same verdict, no second compare
            res = compare_case(cand, expected["eager"][t], golden[t] if golden else None, inputs["trials"][t],
                               task.comparator, task.tolerance, comp_args, memo=memo)
            if not res.ok:
                where = f"trial {t} (seed {inputs['seeds'][t]})" if n < len(outs["trials"]) else \
                    "re-check call (same inputs as trial 0, after other calls)" if n < n_checked else \
                    "call after timing (same inputs as trial 0, after the timed loop)"
                reason = res.reason if res.reason != "tensor_subclass" else "tensor_subclass"
                status = HACK_DETECTED if reason == "tensor_subclass" else MISMATCH
                cres.max_abs_err, cres.allowed_abs_err, cres.ref_err = res.max_abs_err, res.allowed_abs_err, res.ref_err
                return status, reason, f"{where}: {res.message}"
            if res.max_abs_err is not None and res.max_abs_err >= worst_err:
                worst_err = res.max_abs_err
                cres.max_abs_err, cres.max_rel_err = res.max_abs_err, res.max_rel_err
                cres.allowed_abs_err, cres.ref_err = res.allowed_abs_err, res.ref_err
        return OK, None, None

    @staticmethod
    def _compare_benchmark_rule(task: Task, expected: dict[str, Any], inputs: dict[str, Any],
                                outs: dict[str, Any]) -> tuple[str, str | None, str | None]:
        """The `benchmark` policy: the benchmark's own comparison (e.g. allclose at its fixed
        tolerance) of every seeded trial against the eager reference; like the benchmarks, no
        re-check call and no comparison after timing."""
        rule = task.metadata["benchmark_rule"]
        for t, cand in enumerate(outs["trials"]):
            res = compare_rule(cand, expected["eager"][t], rule)
            if not res.ok:
                return MISMATCH, res.reason, f"trial {t} (seed {inputs['seeds'][t]}), {rule.get('name', 'benchmark rule')}: {res.message}"
        return OK, None, None

    # ---------------------------------------------------------------------------- speed
    def _case_speed(self, cres: CaseResult, ref_report: dict[str, Any], cand_timing: dict[str, Any],
                    task: Task) -> None:
        ref_t = (ref_report.get("timing") or {}).get("eager") or {}
        if "ms" not in ref_t or "ms" not in cand_timing:
            return
        cres.ref_ms, cres.cand_ms = ref_t["ms"], cand_timing["ms"]
        cres.speedup = cres.ref_ms / cres.cand_ms if cres.cand_ms > 0 else None
        comp_t = (ref_report.get("timing") or {}).get("compile") or {}
        if "ms" in comp_t and cres.cand_ms > 0:
            cres.speedup_compile = comp_t["ms"] / cres.cand_ms
        cres.timing_method = cand_timing.get("method")
        dtype = task.dtypes[0] if task.dtypes else None
        floor = time_floor_ms(self._gpu_spec, cres.min_bytes, cres.flops, dtype)
        if floor:
            cres.sol = floor / cres.cand_ms
            if cres.cand_ms < floor * 0.8:  # faster than memory can move the bytes: impossible
                cres.status, cres.reason = HACK_DETECTED, "below_roofline_floor"
                cres.message = (f"measured {cres.cand_ms:.4g} ms is below the {floor:.4g} ms needed to move "
                                f"{cres.min_bytes} bytes on {self._gpu_spec.name}")

    def _aggregate_speed(self, v: Verdict) -> None:
        sp = [c.speedup for c in v.cases if c.speedup]
        if sp and v.status == OK:
            v.speedup = math.exp(sum(math.log(s) for s in sp) / len(sp))
            spc = [c.speedup_compile for c in v.cases if c.speedup_compile]
            if spc and len(spc) == len(sp):
                v.speedup_compile = math.exp(sum(math.log(s) for s in spc) / len(spc))
            sols = [c.sol for c in v.cases if c.sol]
            v.sol = sum(sols) / len(sols) if sols else None

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


_REFERENCE_LOCKS: dict[tuple, threading.Lock] = {}
# Reference computations that failed in this process, by the same key as the lock: the other
# candidates of that task get the same answer without running the failing reference again.
_REFERENCE_FAILURES: dict[tuple, str] = {}
_REFERENCE_LOCKS_GUARD = threading.Lock()


def _reference_lock(key: tuple) -> threading.Lock:
    """One lock per (task, device, settings) in this process, shared by every Verifier in it."""
    with _REFERENCE_LOCKS_GUARD:
        return _REFERENCE_LOCKS.setdefault(key, threading.Lock())


def verify_files(task_path: str, candidate_path: str, device: str = "auto", **settings: Any) -> Verdict:
    """One-shot convenience: verify one candidate file against one task file."""
    with Verifier(device, spares=0, **settings) as verifier:
        return verifier.verify(task_path, candidate_path)


_JUDGE_SEMAPHORES: dict[int, threading.BoundedSemaphore] = {}
_JUDGE_SEMAPHORES_GUARD = threading.Lock()


def judge_slots(count: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore for `count` comparisons at once (see
    VerifierConfig.judge_slot_count): shared by every Verifier of the process, because several
    GPUs' verifiers judge in this one process and share its cores."""
    with _JUDGE_SEMAPHORES_GUARD:
        return _JUDGE_SEMAPHORES.setdefault(count, threading.BoundedSemaphore(count))


def _describe_device(platform: PlatformInfo) -> str:
    if not platform.can_time:
        return "cpu-interpreter"
    import torch

    return torch.cuda.get_device_name(torch.device(platform.device))


def load_tensor_file(path: str | os.PathLike[str]) -> Any:
    """torch.load of plain tensors only, memory-mapped: the judge reads each element once, so
    copying hundreds of MB of outputs and expected values into memory first (seconds under
    load, with the GIL held while unpickling) is avoided. On Linux the mapping stays valid after
    the file is removed (the candidate's work dir is deleted before judging)."""
    import torch

    return torch.load(path, weights_only=True, mmap=True)


def _same_bits(a: Any, b: Any) -> bool:
    """True when two lists of output leaves are plain tensors (or equal non-tensors) with equal
    shapes, dtypes and bytes. A re-check output identical to an already-judged one needs no second
    tolerance comparison, which costs seconds on outputs of hundreds of MB."""
    import torch

    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if type(x) is not torch.Tensor or type(y) is not torch.Tensor or x.device != y.device \
                    or not bitwise_equal(x, y):
                return False
        elif x != y:
            return False
    return True
