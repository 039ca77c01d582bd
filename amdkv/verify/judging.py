"""Judging a candidate's run: its report and outputs against the references, case by case, into
the verdict's status (and `finish`, the one way a status is decided).

Moved out of verifier.py unchanged (issue 20: one module per job); `Verifier` gets these methods
by inheriting `JudgingMixin`, and `amdkv.verify.verifier` re-exports the module-level names.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from amdkv.errors import HostOutOfMemory, InfrastructureError
from amdkv.tasks.types import Task
from amdkv.verify.compare import COMPARATORS_READING_INPUTS, bitwise_equal, compare_case, compare_rule, to_device
from amdkv.verify import os_sandbox
from amdkv.verify.file_lock import exclusive_file_lock
from amdkv.verify.gpu_memory import is_host_out_of_memory
from amdkv.verify.host_oom import HOST_OOM_HINT
from amdkv.verify.pool import gpu_lock_key, host_memory_cap_bytes
from amdkv.verify.timing import check_consistency as check_timing_consistency
from amdkv.verify.timing import timing_lock_path
from amdkv.verify.worker_process import stderr_excerpt
from amdkv.verify.verdict import (COMPILE_ERROR, HACK_DETECTED, MISMATCH, OK, RUNTIME_ERROR, TIMEOUT, UNVERIFIABLE,
                                  CaseResult, Verdict, compiled_after, worst_status)
from amdkv.verify.disk_admission import candidate_file_need, expected_file_sizes
from amdkv.verify.worker_protocol import (CandidateCaseReport, CandidateResult, Finding, OutputWriteError,
                                          ReferenceCaseReport, WorkerFailure, WorkerReport)

# Findings of the candidate's worker that mean a broken kernel, not a cheat: guard bytes next to
# an input overwritten, an interpreted access outside every tensor argument (interpreter_bounds.py).
RUNTIME_ERROR_FINDINGS = frozenset({"out_of_bounds_write", "out_of_bounds_access"})
# Dynamic (in-worker) witnesses a policy does not act on; None: every one.
POLICY_EXEMPT_DYNAMIC: dict[str, frozenset[str] | None] = {
    "strict": frozenset(), "reference": frozenset({"torch_compute_in_forward", "no_kernel_launch"}),
    "benchmark": None}


_JUDGE_SEMAPHORES: dict[int, threading.BoundedSemaphore] = {}
_JUDGE_SEMAPHORES_GUARD = threading.Lock()


# What the judging parent may keep cached on the GPU after a comparison. Its copies of outputs,
# goldens and inputs stay in torch's caching allocator once freed: 5.5-12 GB in `amdkv gen` on the
# H100 of 2026-12-05, beside a served model and the workers, whose references then ran out of memory.
JUDGE_CACHE_KEEP_BYTES = 2 << 30


def release_unused_gpu_cache(device: str) -> None:
    """Give cached, unused GPU memory of this process back to the device when there is more than
    JUDGE_CACHE_KEEP_BYTES of it: the GPU is shared with the workers (and in `amdkv gen` and RL with
    a model), so what the parent merely caches is memory they cannot have. Verdicts are unchanged."""
    import torch

    if torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device) > JUDGE_CACHE_KEEP_BYTES:
        torch.cuda.empty_cache()


def judge_slots(count: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore for `count` comparisons at once (see
    VerifierConfig.judge_slot_count): shared by every Verifier of the process, because several
    GPUs' verifiers judge in this one process and share its cores."""
    with _JUDGE_SEMAPHORES_GUARD:
        return _JUDGE_SEMAPHORES.setdefault(count, threading.BoundedSemaphore(count))


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


def _judging_inputs(task: Task, ref: dict[str, Any]) -> dict[str, Any]:
    """The inputs the comparison reads: the case's file only for a comparator that reads inputs
    (`COMPARATORS_READING_INPUTS`); else the seeds alone (for messages). Why: the judge moved every
    trial's inputs to the GPU for each candidate although the default comparison never reads them:
    64 MB per candidate for `l3_attention_block`'s performance case, up to 17 GB for KernelBench
    level 1's largest problem."""
    if task.comparator in COMPARATORS_READING_INPUTS:
        return load_tensor_file(ref["files"].inputs)
    return {"trials": [[] for _ in ref["seeds"]], "seeds": list(ref["seeds"])}


def _without_golden_note(report: ReferenceCaseReport) -> str:
    """What a mismatch message must add when its case had no float64 golden: the expected output is
    then the eager reference's and the tolerance allows none of the eager's own error, which a
    correct kernel summing in another order can exceed. Said so the reader can tell this apart."""
    if report.golden_available or not report.golden_error:
        return ""
    return (f" [no float64 golden for this case ({report.golden_error[:160]}): the expected output is the "
            "eager reference's, and the tolerance allows none of its error]")


class JudgingMixin:
    """The judging half of `Verifier` (uses its `config`, `platform`, `timeout`, `_case_speed`,
    `_aggregate_speed`)."""

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
               report: WorkerReport | None, outputs: dict[str, Any] | None, load_error: str | None, proc: Any) -> None:
        """Statuses from the candidate's report and outputs (`load_error`: why the outputs file could
        not be loaded); timed as `judge_s` because it runs in this (parent) process for every GPU's
        candidates, so it bounds the throughput of the host."""
        if getattr(proc, "spare_start", None):  # how the candidate's process was started (fork/exec)
            v.env["spare_start"] = proc.spare_start
        if report is not None:  # what the worker's OS sandbox really held
            v.env["sandbox"] = os_sandbox.summary(report.sandbox, self.config.sandbox)
        for key, secs in getattr(proc, "handoff_timings", {}).items():  # parts of candidate_s
            v.timings[key] = round(secs, 3)
        if getattr(proc, "gpu_mem_floor_bytes", 0):  # the cap may exceed the share: verify/gpu_memory.py
            v.env["gpu_mem_floor_gib"] = round(proc.gpu_mem_floor_bytes / 2 ** 30, 3)
        t0 = time.monotonic()
        try:
            self._judge_into(v, task, cases, refs, report, outputs, load_error, proc)
        finally:
            v.timings["judge_s"] = round(time.monotonic() - t0, 3)

    def _outputs_past_their_need(self, fatal: WorkerFailure, task: Task, refs: dict[str, dict[str, Any]]) -> bool:
        """Whether the worker's failure is its outputs' write stopped by a per-file limit that holds
        every correct output of the task (at least `candidate_file_need`; the verifier starts the
        worker with that much): then the outputs are wrong, not the machine. The bound assumes the
        reference's dtypes, so it holds only where the comparison enforces them. A full disk, a limit
        below the need (one the verifier did not set), a need that could not be read, or a benchmark
        rule that accepts other dtypes (KernelBench's, TritonBench-G's: a float64 output may be
        correct and 8 times an fp8 one) stays `infra_error`."""
        need = candidate_file_need(expected_file_sizes(refs))
        limit = fatal.file_size_limit_bytes
        return (fatal.error_type == OutputWriteError.__name__ and self._dtypes_enforced(task)
                and None not in (need, limit) and limit >= need)

    def memory_cap_note(self, err: Any, proc: Any) -> str:
        """For an out-of-memory error's message (`err`: a CandidateError), the cap the allocation met.
        A host allocation (gpu_memory.is_host_out_of_memory): the worker's host-memory cap
        (pool.host_memory_cap_bytes). A device allocation: the candidate's GPU share or twice its
        reference's need. "" for any other error."""
        if err.reason != "oom":
            return ""
        if is_host_out_of_memory(err.type, err.message):
            name = "AMDKV_MEM_CAP_GIB" if self.platform.interpreter else "AMDKV_GPU_HOST_MEM_GIB"
            gib = host_memory_cap_bytes(self.platform, self.config) / 2 ** 30
            return (f"\n[host memory cap] a candidate's worker may hold {gib:g} GiB of host memory (its data "
                    f"segment, RLIMIT_DATA; {name} sets it)")
        if self.platform.interpreter:
            return ""
        floor = getattr(proc, "gpu_mem_floor_bytes", 0) / 2 ** 30
        return (f"\n[memory cap] a candidate may use its share of the GPU or twice what the reference needed "
                f"({floor:.2f} GiB here), whichever is more (verify/gpu_memory.py; AMDKV_GPU_MEM_FRACTION "
                "sets the share)")

    def _dtypes_enforced(self, task: Task) -> bool:
        """Whether this verifier's comparison refuses an output of another dtype than the reference's:
        always, except under a benchmark rule without `check_dtype`."""
        rule = self._benchmark_rule(task)
        return not rule or bool(rule.get("check_dtype", False))

    def _benchmark_rule(self, task: Task) -> dict[str, Any] | None:
        """The benchmark's own comparison rule when it decides (policy `benchmark` and a task that has
        one), else None: the tolerance policy decides."""
        return task.metadata.get("benchmark_rule") if self.config.policy == "benchmark" else None

    def _judge_into(self, v: Verdict, task: Task, cases: list[Any], refs: dict[str, dict[str, Any]],
                    report: WorkerReport | None, outputs: dict[str, Any] | None, load_error: str | None,
                    proc: Any) -> None:
        if proc.stdout.strip() or proc.stderr.strip():
            v.diagnostics += f"\n[candidate stderr]\n{stderr_excerpt(proc.stderr, 3000)}" if proc.stderr.strip() else ""
        if proc.timed_out:
            reason = "interpreter_timeout" if self.platform.interpreter else "wall_timeout"
            return self.finish(v, TIMEOUT, reason, diag=f"the candidate did not finish within {self.timeout:.0f} s")
        if report is None:
            if proc.host_oom:
                raise HostOutOfMemory(proc.host_oom, hint=HOST_OOM_HINT)
            sig = proc.signal_name
            reason = f"crashed:{sig}" if sig else ("process_exited" if proc.returncode == 0 else f"exit_code:{proc.returncode}")
            return self.finish(v, RUNTIME_ERROR, reason, diag=f"the candidate's process died "
                               f"({sig or 'rc ' + str(proc.returncode)}) before reporting")
        if report.fatal is not None:
            if self._outputs_past_their_need(report.fatal, task, refs):
                return self.finish(v, MISMATCH, "outputs_too_large", compiled=True,
                                   diag=f"the candidate's outputs need a larger file than any correct outputs of "
                                        f"this task (its references' expected-outputs files bound them; "
                                        f"disk_admission.candidate_file_need): {report.fatal.error}")
            raise InfrastructureError(f"worker failed: {report.fatal.error_type}: {report.fatal.error}\n"
                                      f"{report.fatal.traceback}")
        result = report.result_of(CandidateResult)
        if result.file_violations:
            v.hack_findings += [f"sandbox: {x}" for x in result.file_violations]
            return self.finish(v, HACK_DETECTED, "sandbox_violation",
                               diag="the candidate tried to open files or processes it was not given:\n"
                                    + "\n".join(result.file_violations[:10]))
        err = result.error
        if err:
            v.compiled = compiled_after(err.status)
            return self.finish(v, err.status, err.reason,
                               diag=f"{err.type}: {err.message}{self.memory_cap_note(err, proc)}\n{err.traceback}")
        if load_error is not None or outputs is None:
            return self.finish(v, HACK_DETECTED, "unloadable_outputs",
                               diag=f"the outputs are not plain tensors: {load_error}")
        v.compiled = True
        statuses = []
        for case in cases:
            r = refs[case.name]
            crep = next((c for c in result.cases if c.name == case.name), None)
            cres = CaseResult(name=case.name, tags=list(case.tags), min_bytes=r["report"].min_bytes,
                              flops=case.flops)
            v.cases.append(cres)
            if crep is None:
                cres.status, cres.reason = RUNTIME_ERROR, "not_run"
                statuses.append(RUNTIME_ERROR)
                continue
            if crep.error:
                e = crep.error
                cres.status, cres.reason, cres.message = e.status, e.reason, f"{e.type}: {e.message}"
                statuses.append(e.status)
                v.diagnostics += f"\n[{case.name}] {e.type}: {e.message}{self.memory_cap_note(e, proc)}\n{e.traceback}"
                if not compiled_after(e.status):
                    v.compiled = False
                continue
            status, reason, message = self._case_runtime_findings(crep)
            if status is None:
                expected = load_tensor_file(r["files"].expected)
                inputs = _judging_inputs(task, r)
                t_wait = time.monotonic()
                with judge_slots(self.config.judge_slot_count()):
                    v.timings["judge_wait_s"] = round(v.timings.get("judge_wait_s", 0.0) + time.monotonic() - t_wait, 3)
                    status, reason, message = self._compare_on_judge_device(task, case, cres, expected, inputs,
                                                                            outputs.get(case.name))
                if status == MISMATCH:
                    message = f"{message}{_without_golden_note(r['report'])}"
            cres.status, cres.reason, cres.message = status, reason, message
            cres.trials = len(r["seeds"])
            statuses.append(status)
            if status == OK and crep.timing:
                self._case_speed(cres, r["report"], crep.timing, task)
                # the parent cross-checks the child's timing against wall clocks (timing.py)
                bad_timing = check_timing_consistency(crep.timing, getattr(proc, "parent_wall_s", None))
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
        v.timings["worker_startup_s"] = round(report.startup_s, 3)  # paid before the job (warm spare)
        v.timings["worker_job_s"] = round(report.job_s, 3)  # the job in the worker; candidate_s minus it: hand-offs
        for phase, secs in result.phase_s.items():
            v.timings[f"worker_{phase}_s"] = round(secs, 3)
        for phases, suffix in ((result.phase_cpu_s, "cpu_s"), (result.phase_children_cpu_s, "children_cpu_s")):
            for phase, secs in phases.items():  # host CPU; children = gcc, ptxas
                v.timings[f"worker_{phase}_{suffix}"] = round(secs, 3)
        for part, secs in report.startup_parts.items():  # cuda_context_s, ..._cpu_s
            v.timings[f"worker_startup_{part}"] = round(secs, 3)
        # host CPU of the worker process, gcc/ptxas children included
        v.timings["worker_cpu_s"], v.timings["worker_job_cpu_s"] = round(report.cpu_s, 3), round(report.job_cpu_s, 3)
        if report.gpu_peak_bytes:  # GPU platforms: the job's peak of PyTorch-allocated memory, for reading
            v.timings["worker_gpu_peak_gib"] = round(report.gpu_peak_bytes / 2 ** 30, 3)

    def _case_runtime_findings(self, crep: CandidateCaseReport) -> tuple[str | None, str | None, str | None]:
        exempt = POLICY_EXEMPT_DYNAMIC[self.config.policy]
        if exempt is None:  # `benchmark`: the benchmark's own rule has no runtime witnesses
            return None, None, None
        if crep.findings:
            # the most severe finding wins (a cheat is never reported as a mere out-of-bounds bug)
            def status_of(finding: Finding) -> str:
                return RUNTIME_ERROR if finding.code in RUNTIME_ERROR_FINDINGS else HACK_DETECTED

            status = worst_status([status_of(f) for f in crep.findings])
            f = next(f for f in crep.findings if status_of(f) == status)
            return status, f.code, f.message
        if crep.compute_ops and "torch_compute_in_forward" not in exempt:
            ops = ", ".join(f"{k}×{n}" for k, n in sorted(crep.compute_ops.items()))
            return HACK_DETECTED, "torch_compute_in_forward", (
                f"PyTorch computed part of the result in forward (aten ops: {ops}); the work must be done "
                "in the candidate's kernels")
        if any(n == 0 for n in crep.launches) and "no_kernel_launch" not in exempt:
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
        finally:
            g_expected = g_inputs = g_outs = None
            release_unused_gpu_cache(dev)

    def _compare_case(self, task: Task, case: Any, cres: CaseResult, expected: dict[str, Any],
                      inputs: dict[str, Any], outs: dict[str, Any] | None) -> tuple[str, str | None, str | None]:
        if outs is None or len(outs["trials"]) != len(expected["eager"]):
            return RUNTIME_ERROR, "missing_outputs", "the candidate returned no outputs for this case"
        if self._benchmark_rule(task):
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
