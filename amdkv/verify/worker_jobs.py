"""The two jobs a worker process runs (see worker.py): reference and candidate.

Inputs travel from the reference process to the candidate's through a file that holds only
inputs (never expected outputs); expected outputs go to a separate file the candidate's sandbox
cannot open. Outputs travel back to the parent through `torch.save`, and the parent loads them
with `weights_only=True`, so a candidate cannot smuggle code or tensor subclasses across.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import shutil
import time
import traceback
from contextlib import redirect_stdout
from typing import Any, Sequence

import torch

from amdkv.verify.compare import bitwise_equal, flatten_outputs, to_device
from amdkv.verify import interpreter_numpy
from amdkv.verify.gpu_memory import is_host_out_of_memory, says_out_of_memory
from amdkv.verify.output_spill import OutputSpill, budget_under_file_limit, spill_folder_for
from amdkv.verify.phase_clock import PhaseClock
from amdkv.verify.worker_protocol import (FILE_SIZE_LIMITED, REFERENCE_PHASES, CandidateCaseReport, CandidateError,
                                          CandidateJob, CandidateResult, Finding, OutputWriteError,
                                          ReferenceCaseReport, ReferenceJob, ReferenceResult, ReferenceTiming,
                                          TimingResult, worker_settings)

TRACE_LIMIT = 4000
OUT_OF_BOUNDS_ACCESS = "out_of_bounds_access"  # reason/finding code of a refused interpreter access


# ---------------------------------------------------------------------------------------- utils
def _is_out_of_memory(exc: BaseException) -> bool:
    """Out of GPU or host memory: the types by isinstance (a candidate's own class named
    OutOfMemoryError is not one), the rest (allocator errors raised as RuntimeError) by text."""
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or says_out_of_memory(str(exc))


def _to_float64(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor) and obj.is_floating_point():
        return obj.to(torch.float64)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_float64(o) for o in obj)
    return obj


def _host_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of `t` that shares nothing with it, made with one copy on every device: on a GPU
    the device-to-host transfer is that copy (`.cpu().clone()` copied the result a second time on
    the host, a few hundred MB per call for a performance case); on `cpu` it is the clone."""
    return t.detach().to("cpu", copy=True)


def _detach_leaves(out: Any) -> list[Any]:
    """Output leaves as CPU tensors / Python scalars (plain tensors only)."""
    leaves = []
    for leaf in flatten_outputs(out):
        if isinstance(leaf, torch.Tensor):
            leaves.append(torch.Tensor(leaf.detach().cpu()) if type(leaf) is not torch.Tensor
                          else _host_copy(leaf))
        else:
            leaves.append(leaf)
    return leaves


def _dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "") if isinstance(t, torch.Tensor) else type(t).__name__


def _nbytes(objs: list[Any]) -> int:
    return sum(o.numel() * o.element_size() for o in objs if isinstance(o, torch.Tensor))


def verifier_copies_note(trials: list[Any], extra_copy: str) -> str:
    """What the verifier itself held on the device when a candidate ran out of device memory, for
    the error's message: the verdict stays the candidate's `runtime_error`/`oom` (a rule that
    excused it by the verifier's share could be steered by the candidate), but the reader can tell
    a problem whose inputs crowd the cap from a candidate that allocates too much (session 25's
    `45_Average_Pooling_2D`). `trials`: the case's resident trial inputs; `extra_copy`: what one
    more copy of a trial's inputs the verifier held at the failure was (a checked call's guarded
    copy, the timing's clone), "" for none. Empty when nothing the verifier holds is on a device."""
    per_trial = [_nbytes([leaf for leaf in flatten_outputs(t)
                          if isinstance(leaf, torch.Tensor) and leaf.device.type != "cpu"]) for t in trials]
    resident = sum(per_trial)
    if not resident:
        return ""
    extra = max(per_trial) if extra_copy else 0
    return (f" [amdkv: the verifier's own copies of this case's inputs held {(resident + extra) / 2**30:.2f} GiB"
            f" of the device's memory: {resident / 2**30:.2f} GiB of resident trial inputs"
            + (f", {extra / 2**30:.2f} GiB for {extra_copy}" if extra_copy else "") + "]")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class TailBuffer(io.TextIOBase):
    """What the candidate prints (stdout redirected here), kept to its last `keep` characters: a
    candidate printing gigabytes would otherwise grow the worker's memory until it dies."""

    def __init__(self, keep: int = 64 * 1024) -> None:
        super().__init__()
        self.keep = keep
        self._parts: list[str] = []
        self._size = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._parts.append(text)
        self._size += len(text)
        if self._size > 2 * self.keep:
            tail = "".join(self._parts)[-self.keep:]
            self._parts, self._size = [tail], len(tail)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)


# ------------------------------------------------------------------------------------ reference
def save_for_parent(obj: Any, path: str) -> None:
    """torch.save of a file the parent reads; a failed write is OutputWriteError, the machine's
    failure, never the task's. torch reports a short write as "unexpected pos N vs M" whatever the
    cause: a full disk, or the OS sandbox's file-size limit (RLIMIT_FSIZE, AMDKV_SANDBOX_FILE_SIZE_GIB).
    KernelBench's three references whose expected outputs exceed 4 GiB failed so on the H200 in two
    sessions (2026-12-02, 2026-12-04), first blamed on the disk; the message now says which it is.

    Written without zip CRC-32 checksums: torch.load never checks them (it reads the records through
    their offsets, or maps them), so computing them bought nothing on our read path and cost most of a
    save's CPU (512 MiB of outputs on the 2-core dev machine: 0.53 -> 0.17 CPU-s, wall 0.73 -> 0.38 s).
    A file cut short still fails to load (its zip directory is at the end). The bytes of every tensor
    are the same, so verdicts are."""
    try:
        with _no_zip_checksums():
            torch.save(obj, path)
    except Exception as exc:  # noqa: BLE001 - whatever torch raises for a short write
        written = os.path.getsize(path) if os.path.exists(path) else 0
        needed = _tensor_bytes(obj)
        failure = OutputWriteError(f"writing {path} failed after {written} bytes: {type(exc).__name__}: {exc}"
                                   + _file_size_note(needed) + _free_disk_note(path))
        failure.limit_bytes = _file_size_limit_passed(needed)
        raise failure from exc


def _no_zip_checksums() -> Any:
    """torch.save without CRC-32 for the duration: torch's own config patch (a torch without that
    setting saves as before)."""
    try:
        from torch.utils.serialization import config as serialization_config
    except ImportError:
        return contextlib.nullcontext()
    return serialization_config.patch({"save.compute_crc32": False})


def _tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in a (nested) object: about what torch.save writes."""
    if isinstance(obj, torch.Tensor):
        return _nbytes([obj])
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def _free_disk_note(path: str) -> str:
    """The free space of the file's disk just after a failed write: torch's message hides the errno, and
    session 23's KernelBench run had a short write that neither the file-size limit nor the free disk
    seen before and after the step explained."""
    try:
        free = shutil.disk_usage(os.path.dirname(path) or ".").free
    except OSError:
        return ""
    return f"; its disk had {free / 2 ** 30:.2f} GiB free just after"


def _file_size_limit_passed(needed: int) -> int | None:
    """This process's per-file limit (RLIMIT_FSIZE) when a file of `needed` bytes passes it, else None."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY or needed < soft else soft


def _file_size_note(needed: int) -> str:
    """What to say when the file needed more than this process may write to one file ('' if not)."""
    soft = _file_size_limit_passed(needed)
    if soft is None:
        return ""

    def size(n: int) -> str:
        return f"{n / 2 ** 30:.2f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.1f} MiB"

    return f"; the file needs about {size(needed)} and {FILE_SIZE_LIMITED} is {size(soft)} (AMDKV_SANDBOX_FILE_SIZE_GIB)"


def run_reference_job(job: ReferenceJob) -> ReferenceResult:
    from amdkv.tasks.loader import load_task_and_module
    from amdkv.verify.program import program_spec
    from amdkv.verify.runtime_guards import poisoned_allocations

    interpreter_numpy.install_if_interpreting()  # scalar loop bounds under NumPy 2.4+
    device = job.device
    task, module = load_task_and_module(job.task_path)
    program = program_spec(task) is not None
    result = ReferenceResult(cases=[])
    # A program's reference runs the benchmark's own tests, as its candidates do; those run with fresh
    # allocations filled with NaN, so the reference must too: a benchmark kernel that leaves part of
    # its `torch.empty` output unwritten (TritonBench-G's attention_forward_triton writes 96 of 128
    # columns) then reads NaN at the same places in both, instead of NaN against whatever memory held
    # (16 references were `mismatch` against themselves on the H200, 2026-12-02). A candidate that
    # leaves unwritten what the reference writes still reads NaN there: still a mismatch. PyTorch
    # references (ModelNew tasks) keep running as before.
    allocations = poisoned_allocations if program else contextlib.nullcontext
    for cjob in job.cases:
        case = task.case(cjob.name)
        t0 = time.monotonic()
        clock = PhaseClock(REFERENCE_PHASES)
        torch.manual_seed(cjob.init_seed)
        model_cpu = module.Model(*case.init_inputs)
        state_dict = {k: v.detach().clone() for k, v in model_cpu.state_dict().items()}
        model = copy.deepcopy(model_cpu).to(device).eval()
        golden_model = None
        if cjob.golden:
            # float64 on the same device: GPUs make performance-sized goldens cheap.
            golden_model = copy.deepcopy(model_cpu).to(torch.float64).to(device).eval()
        # Performance-only cases keep their golden in float32 (half the disk; still far more
        # precise than any fp32/fp16/bf16 output it is compared with).
        golden_store = torch.float64 if case.is_correctness else torch.float32
        trials, eager, golden, mutated_all = [], [], [], set()
        golden_ok = golden_model is not None
        golden_error = None
        gpu_need = 0
        for seed in cjob.seeds:
            with clock.phase("make_inputs"):
                torch.manual_seed(seed)
                inputs = list(case.make_inputs())
                trials.append(inputs)
                # never the trial's own tensors: on `cpu` to_device returns them, and a reference that
                # changes its input in place then changed the saved trial too (candidates ran on the
                # changed inputs; found in session 23)
                dev_inputs = [d.clone() if d is h and isinstance(d, torch.Tensor) else d
                              for d, h in zip(to_device(inputs, device), inputs)]
            with clock.phase("eager"):
                before = [x.clone() if isinstance(x, torch.Tensor) else x for x in dev_inputs]
                with GpuNeed(device, model, dev_inputs) as need, torch.no_grad(), allocations():
                    out = model(*dev_inputs)
                gpu_need = max(gpu_need, need.bytes)
                _sync(device)
                mutated = [i for i, (a, b) in enumerate(zip(before, dev_inputs))
                           if isinstance(a, torch.Tensor) and not bitwise_equal(a, b)]
                mutated_all.update(mutated)
                leaves = _detach_leaves(out) + [_host_copy(dev_inputs[i]) for i in mutated]
                eager.append(leaves)
            if golden_ok:
                try:
                    with clock.phase("golden"):
                        # from the trial's inputs as they were on the device before the eager call
                        # (`before`): converted there, instead of a host clone converted on the host and
                        # copied over at twice its bytes (KernelBench's largest: 6 GiB of float32 inputs
                        # made 12 GiB on the host, then crossed to the GPU). float64 holds every float32,
                        # float16 and bfloat16 value exactly, so the golden is the same bit for bit.
                        # Only where `before` holds the whole trial: it clones the top-level tensors, so
                        # a list of tensors inside the inputs (which the eager call may have changed in
                        # place) comes from the host's untouched copy as before.
                        g_inputs = (_to_float64(before) if all(not isinstance(x, (list, tuple, dict)) for x in inputs)
                                    else to_device(_to_float64([x.clone() if isinstance(x, torch.Tensor) else x
                                                                for x in inputs]), device))
                        with torch.no_grad():
                            g_out = golden_model(*g_inputs)
                        g_leaves = _detach_leaves(g_out) + [_host_copy(g_inputs[i]) for i in mutated]
                        golden.append([g.to(golden_store) if isinstance(g, torch.Tensor) and g.is_floating_point()
                                       else g for g in g_leaves])
                        del g_inputs, g_out
                except Exception as exc:  # some ops have no float64 kernel: fall back to eager
                    if _is_out_of_memory(exc) and not cjob.golden_oom_fallback:
                        # memory is the moment's (other references beside it), not the task's: without
                        # a golden the tolerance allows no eager error at all, so a correct kernel
                        # could fail (l3_attention_block on an 80-GB H100, 2026-12-05). Fail as out of
                        # memory; the reference gate runs this job again alone.
                        raise
                    golden_ok, golden_error = False, f"{type(exc).__name__}: {exc}"[:300]
        if not golden_ok:
            golden = []
        if program and case.is_correctness:
            with clock.phase("reproducible"):
                check_reproducible(task, model, trials, eager, device, allocations)
        timing = None
        if cjob.time:
            with clock.phase("timing"):
                timing = _time_reference(model, trials[0], device, cjob.flush_bytes, cjob.compile_baseline)
        with clock.phase("save"):
            save_for_parent({"init_inputs": case.init_inputs, "init_seed": cjob.init_seed,
                             "state_dict": state_dict, "trials": trials, "seeds": cjob.seeds,
                             "mutated": sorted(mutated_all)}, cjob.inputs_file)
            save_for_parent({"eager": eager, "golden": golden if golden_ok else None}, cjob.expected_file)
        first_out = eager[0]
        result.cases.append(ReferenceCaseReport(
            name=case.name,
            input_dtypes=[_dtype_name(x) for x in trials[0]],
            output_dtypes=[_dtype_name(x) for x in first_out],
            mutated=sorted(mutated_all),
            min_bytes=case.min_bytes or (_nbytes(trials[0]) + _nbytes(first_out)),
            golden_available=golden_ok,
            golden_error=golden_error,
            timing=timing,
            seconds=time.monotonic() - t0,
            gpu_need_bytes=gpu_need,
            output_bytes=_nbytes(first_out),
            phase_s={k: round(v, 4) for k, v in clock.wall.items()},
        ))
    return result


class GpuNeed:
    """What one eager forward of the reference needs on a GPU: its weights and buffers, the trial's
    inputs, and the forward's peak above what was allocated before it (outputs included). The
    reference worker's own extras (the float64 golden model, earlier trials) are not counted: a
    candidate has none of them. On the CPU, 0.

    Why: candidates are capped at a share of the GPU (0.85 / concurrent jobs), references are not,
    so with 8 jobs on an H100 ROCmBench's flash-attention test ran as its reference and failed as a
    candidate (verify/gpu_memory.py)."""

    def __init__(self, device: str, model: Any, inputs: Sequence[Any]) -> None:
        self.on_gpu = device.startswith("cuda") and torch.cuda.is_available()
        self.device, self.model, self.inputs = device, model, inputs
        self.bytes = 0

    def __enter__(self) -> GpuNeed:
        if self.on_gpu:
            torch.cuda.synchronize(self.device)
            self._before = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self.on_gpu or exc[0] is not None:
            return
        torch.cuda.synchronize(self.device)
        forward = max(0, torch.cuda.max_memory_allocated(self.device) - self._before)
        held = [*self.model.parameters(), *self.model.buffers()] if isinstance(self.model, torch.nn.Module) else []
        self.bytes = _nbytes(held) + _nbytes(list(self.inputs)) + forward


class ReferenceNotReproducible(Exception):
    """The benchmark's own tests give different outputs for the same seed: no candidate can be
    judged against them by comparison."""


def check_reproducible(task: Any, model: Any, trials: list[list[Any]], firsts: list[list[Any]], device: str,
                       allocations: Any) -> None:
    """Run each of a program's trials again with the same seed and compare it with its first run the
    way candidates are compared (the task's comparator and tolerance). A benchmark test that races
    (TritonBench-G's index_select_bwd stores five rows into one in any order) or reads the clock
    would otherwise make every candidate, the benchmark's own kernel included, a `mismatch`; this
    makes the task `unverifiable` saying why (reference_failed, verifier.py), once per task. Every
    trial, not only the first: on the H200 (2026-12-04) `flash_decode2_phi` reproduced its first
    seed and not its second, and its own kernel was then a `mismatch` against itself."""
    from amdkv.verify.compare import compare_case

    for number, (inputs, first) in enumerate(zip(trials, firsts)):
        dev_inputs = to_device(inputs, device)
        with torch.no_grad(), allocations():
            again = model(*dev_inputs)
        _sync(device)
        leaves = _detach_leaves(again)
        res = compare_case(leaves, first[:len(leaves)], None, inputs, task.comparator, task.tolerance,
                           task.metadata.get("comparator_args"))
        if not res.ok:
            raise ReferenceNotReproducible(
                f"the benchmark's tests do not reproduce their own outputs: a second run of trial {number} with "
                f"the same seed differs from the first ({res.message}); its kernel or tests race or read state "
                "that changes between runs, so no candidate can be judged by comparing outputs")


def _time_reference(model: Any, inputs: list[Any], device: str, flush_bytes: int,
                    compile_baseline: bool) -> ReferenceTiming:
    """Eager and torch.compile baselines of the reference, timed once per GPU and cached."""
    from amdkv.verify import timing

    dev_inputs = to_device(inputs, device)
    with torch.no_grad():
        eager = timing.measure(lambda: model(*dev_inputs), flush_nbytes=flush_bytes, device=device)
        if not compile_baseline:
            return ReferenceTiming(eager=eager, compile=None, compile_error=None)
        try:
            compiled = torch.compile(model)
            compiled(*dev_inputs)
            return ReferenceTiming(eager=eager, compile_error=None, compile=timing.measure(
                lambda: compiled(*dev_inputs), flush_nbytes=flush_bytes, device=device))
        except Exception as exc:  # a baseline that cannot compile is reported, not fatal
            return ReferenceTiming(eager=eager, compile=None, compile_error=f"{type(exc).__name__}: {exc}"[:300])


# ------------------------------------------------------------------------------------ candidate
def _classify_exception(exc: BaseException, in_kernel: bool) -> tuple[str, str]:
    """(status, reason) for an exception escaping the candidate's code."""
    name = type(exc).__name__
    mod = type(exc).__module__ or ""
    if _is_out_of_memory(exc):
        return "runtime_error", "oom"  # (host: the memory cap)
    if isinstance(exc, PermissionError) and "amdkv sandbox" in str(exc):
        return "hack_detected", "sandbox_violation"
    if mod.startswith("triton") and ("Compilation" in name or "Interpreter" in name):
        return "compile_error", "triton_compile_error"
    if "OutOfResources" in name:
        return "compile_error", "out_of_resources"
    if in_kernel:
        return "compile_error", "kernel_error"
    if isinstance(exc, SystemExit):
        return "runtime_error", "sys_exit"
    return "runtime_error", f"exception:{name}"


def _error_entry(exc: BaseException, stage: str, in_kernel: bool) -> CandidateError:
    status, reason = _classify_exception(exc, in_kernel)
    return CandidateError(stage=stage, status=status, reason=reason, type=type(exc).__name__,
                          message=str(exc)[:1500], traceback=traceback.format_exc()[-TRACE_LIMIT:])


def _patch_autotune_for_interpreter() -> None:
    """Under the interpreter there is no timer: autotune picks its first (pruned) config.

    The config used is recorded by the launch capture, so resource numbers name it.
    """
    from triton.runtime import autotuner

    def _bench(self, *args, config, **meta):  # noqa: ARG001 - signature of Autotuner._bench
        return [0.0, 0.0, 0.0]

    autotuner.Autotuner._bench = _bench


def _readable_roots(code_path: str, readable: Sequence[str] = ()) -> list[str]:
    """What the audit hook lets Python code read: the Python installation and amdkv (the same list
    as the OS sandbox's, os_sandbox.python_roots), a few system files, the code's own file
    `code_path` and `readable` (a job's own files)."""
    from amdkv.verify.os_sandbox import python_roots

    roots = {"/proc", "/sys", "/dev", "/usr/lib", "/usr/local/cuda", "/opt/rocm", "/etc/ld.so.cache",
             "/usr/share/zoneinfo", code_path, *python_roots()}
    return sorted(roots) + list(readable)


def run_candidate_job(job: CandidateJob) -> CandidateResult:
    from amdkv.tasks.loader import import_source_file
    from amdkv.verify.runtime_guards import (FileAccessGuard, LaunchCounter, TorchOpRecorder,
                                             guarded_copy, guards_intact, poisoned_allocations)

    device = job.device
    # where the worker's time goes (wall and host-CPU seconds per phase; `first_call` is the first
    # checked call, which JIT-compiles the candidate's kernels): verdict.timings
    # (`guards`: the file-access guard's set-up; `build`: ModelNew built, weights loaded, moved to the
    # device; together the ~0.5 s of a job no phase counted in session 7)
    clock = PhaseClock(("load_inputs", "guards", "import", "build", "first_call", "trials", "timing",
                        "post_timing_check", "save_outputs"), wall_only=("lock_wait", "lock_held", "spill_outputs"))
    report = CandidateResult(cases=[], error=None, file_violations=[], captures=[], kernels={}, stdout_tail="",
                             import_s=None, phase_s=clock.wall, phase_cpu_s=clock.cpu,
                             phase_children_cpu_s=clock.children_cpu, launcher_signatures=[])
    # 1. Everything the candidate may use is loaded before its code runs.
    with clock.phase("load_inputs"):
        case_inputs = {c.name: torch.load(c.inputs_file, weights_only=True) for c in job.cases}

    captures: list[dict[str, Any]] = []
    capture_keys: set[str] = set()

    def on_launch(kernel: Any, args: tuple, kwargs: dict, grid: Any) -> None:
        if not job.capture or len(captures) >= 32:
            return
        from amdkv.verify.amd import triton_capture  # provided by the AMD-compile layer
        cap = triton_capture.capture_launch(kernel, args, kwargs, grid)
        if cap is not None:
            key = repr(sorted((k, repr(v)) for k, v in cap.items() if k != "grid"))
            if key not in capture_keys:
                capture_keys.add(key)
                captures.append(cap)

    counter = LaunchCounter(on_launch=on_launch)
    counter.install()
    backend = job.backend
    if backend is not None and backend.trusted_from_line is not None:  # a program (verify/program.py)
        TorchOpRecorder.trusted_region = (str(os.path.realpath(job.candidate_path)), int(backend.trusted_from_line))
    if backend is not None and backend.hip_prebuilt is not None:  # HIP: the parent built the extensions
        from amdkv.verify.backends.hip_run import install_prebuilt
        install_prebuilt(backend.hip_prebuilt, counter)
    bounds = None
    interpreter_numpy.install_if_interpreting()  # scalar loop bounds under NumPy 2.4+
    if job.interpreter:
        _patch_autotune_for_interpreter()
        # @triton.jit helpers called from a kernel skip the interpreter's per-call re-patching of
        # triton.language when the launch already patched it (interpreter_helpers.py: same results)
        from amdkv.verify import interpreter_helpers

        interpreter_helpers.install()
        # every load/store/atomic of an interpreted kernel is checked against its launch's tensor
        # arguments (interpreter_bounds.py): installed before the candidate's code exists
        from amdkv.verify.interpreter_bounds import InterpreterBoundsChecker

        bounds = InterpreterBoundsChecker()
        bounds.install()
    else:
        # the signatures of Triton's launcher builds from here on go into the report (the parent may
        # build each once for later spares: triton_launchers.py); recorded before the candidate exists
        from amdkv.verify.triton_launchers import record_launcher_signatures

        report.launcher_signatures = record_launcher_signatures()
    # Importing the candidate makes importlib probe `__pycache__/<name>.cpython-XY.pyc` beside it.
    # That probe is not the candidate's doing (it made every candidate outside the package dir
    # a `sandbox_violation`), but the .pyc must not be read either: a planted .pyc would run code
    # other than the source the static checks saw. Refuse it quietly; importlib then compiles
    # the source (an OSError on the .pyc is a cache miss for it).
    import importlib.util

    try:
        pyc = [importlib.util.cache_from_source(job.candidate_path)]
    except (NotImplementedError, ValueError):  # no bytecode cache in this interpreter
        pyc = []
    # The report and outputs files are the worker's word to the parent: the candidate, which runs
    # with the worker's temp dir as its cwd and writable, must not be able to write them first.
    protected = [job.report_path, job.report_path + ".tmp", job.outputs_path]
    settings = worker_settings()
    timing_lock, resident_inputs = settings.timing_lock, settings.resident_inputs
    # a checked call's outputs go to a file at once once the worker holds its budget of them
    # (output_spill.py), not into memory until the end: the host memory cap is the candidate's, not ours;
    # and what it holds always fits its outputs file under the file-size limit
    budget = budget_under_file_limit(int(settings.spill_outputs_mib * 2 ** 20))
    spill = OutputSpill(spill_folder_for(job.outputs_path), budget, save=save_for_parent, nbytes=_tensor_bytes)
    with clock.phase("guards"):
        guard = FileAccessGuard(readable=_readable_roots(job.candidate_path, job.readable),
                                writable=[job.out_dir] + ([timing_lock] if timing_lock else []),
                                refused_quietly=pyc, protected=protected, protected_dirs=[spill.folder])
        guard.install()
    if not job.interpreter:
        counter.guard = guard
    stdout_buf = TailBuffer()

    # 2. Import the candidate.
    guard.enabled = True
    try:
        with clock.phase("import"), redirect_stdout(stdout_buf):
            module = import_source_file(job.candidate_path, "amdkv_candidate")
    except BaseException as exc:  # noqa: BLE001
        guard.enabled = False
        report.error = _error_entry(exc, "import", False)
        if isinstance(exc, SyntaxError):
            report.error.status, report.error.reason = "compile_error", "syntax_error"
        elif report.error.status == "runtime_error":
            report.error.status, report.error.reason = "compile_error", "import_error"
        report.file_violations = guard.violations
        return report
    report.import_s = clock.wall["import"]
    model_cls = getattr(module, "ModelNew", None)
    if not isinstance(model_cls, type):
        guard.enabled = False
        report.error = CandidateError(stage="import", status="compile_error", reason="no_model_new",
                                      type="AttributeError", message="the candidate defines no class `ModelNew`",
                                      traceback="")
        return report

    outputs: dict[str, Any] = {}
    first_call = True
    for cjob in job.cases:
        data = case_inputs[cjob.name]
        allowed_mut = set(data["mutated"])
        crep = CandidateCaseReport(name=cjob.name, launches=[], compute_ops={}, findings=[], error=None, timing=None)
        report.cases.append(crep)
        # 3. Build ModelNew exactly as the reference was built, then take matching weights.
        try:
            with clock.phase("build"), redirect_stdout(stdout_buf):
                torch.manual_seed(data["init_seed"])
                model = model_cls(*data["init_inputs"])
                own = model.state_dict()
                matching = {k: v for k, v in data["state_dict"].items()
                            if k in own and tuple(own[k].shape) == tuple(v.shape)}
                model.load_state_dict(matching, strict=False)
                model = model.to(device)
                if hasattr(model, "eval"):
                    model.eval()
        except BaseException as exc:  # noqa: BLE001
            crep.error = _error_entry(exc, "init", False)
            if crep.error.status == "runtime_error":
                crep.error.reason = "init_error"
            break

        def call(inputs: list[Any]) -> tuple[list[Any], int, dict[str, int], list[Finding]]:
            """One forward with every runtime check on; returns output leaves, launches, the aten ops
            Python code ran and findings."""
            dev = to_device(inputs, device)
            guarded, raws = [], []
            for x in dev:
                if isinstance(x, torch.Tensor) and x.numel() > 0:
                    v, raw, span = guarded_copy(x)
                    guarded.append(v)
                    raws.append((raw, span, x.element_size()))
                else:
                    guarded.append(x)
                    raws.append(None)
            # The input-mutation check's originals are the tensors the guarded copies were made from
            # (the resident trial, or this call's device copy): the candidate never receives them, so a
            # clone of each would be a third copy of the inputs on the device (session 26; 48 GiB for
            # a 16-GiB input). A clone only where the candidate gets the tensor itself (an empty one).
            originals = [x.clone() if g is x and isinstance(x, torch.Tensor) else x
                         for x, g in zip(dev, guarded)]
            recorder = TorchOpRecorder()
            counter.recorder = recorder
            before = counter.count
            findings: list[Finding] = []
            if bounds is not None:
                bounds.reset()
            try:
                with torch.no_grad(), poisoned_allocations(), recorder, redirect_stdout(stdout_buf):
                    out = model(*guarded)
                _sync(device)
            finally:
                counter.recorder = None
            launches = counter.count - before
            if bounds is not None and bounds.violation is not None:  # refused, and the error swallowed
                findings.append(Finding(code=OUT_OF_BOUNDS_ACCESS, message=bounds.violation.message))
            compute_ops = dict(recorder.compute_ops)
            leaves_dev = flatten_outputs(out)
            subclass = [i for i, leaf in enumerate(leaves_dev)
                        if isinstance(leaf, torch.Tensor) and type(leaf) is not torch.Tensor]
            if subclass:
                findings.append(Finding(code="tensor_subclass",
                                        message=f"output(s) {subclass} are torch.Tensor subclasses"))
            in_ptrs = [(g.untyped_storage().data_ptr(), g.untyped_storage().nbytes())
                       for g in guarded if isinstance(g, torch.Tensor)] + \
                      [(r[0].untyped_storage().data_ptr(), r[0].untyped_storage().nbytes())
                       for r in raws if r is not None]
            for i, leaf in enumerate(leaves_dev):
                if isinstance(leaf, torch.Tensor) and leaf.numel() > 0:
                    p = leaf.untyped_storage().data_ptr()
                    if any(s <= p < s + n for s, n in in_ptrs):
                        findings.append(Finding(code="output_aliases_input",
                                                message=f"output {i} shares memory with an input"))
            for i, (g, o) in enumerate(zip(guarded, originals)):
                if isinstance(g, torch.Tensor) and i not in allowed_mut and not bitwise_equal(g, o):
                    findings.append(Finding(code="input_mutation", message=f"input {i} was modified"))
            for i, r in enumerate(raws):
                if r is not None and not guards_intact(*r):
                    findings.append(Finding(code="out_of_bounds_write",
                                            message=f"bytes next to input {i} were overwritten"))
            leaves = _detach_leaves(out) + [_host_copy(guarded[i]) for i in sorted(allowed_mut)]
            return leaves, launches, compute_ops, findings

        case_out: dict[str, Any] = {"trials": [], "recheck": None}
        verifier_extra_copy = ""  # what copy of a trial's inputs the verifier holds beside the resident ones

        def checked_call(inputs: list[Any]) -> Any:
            """One checked call, recorded in the case report like every other: the re-check and
            after-timing calls too (their aten ops count, so a candidate cannot fall back to
            PyTorch on those calls alone). Its output leaves, or a marker where they were spilled."""
            nonlocal verifier_extra_copy
            verifier_extra_copy = "the checked call's guarded copy"  # kept when the call raises
            leaves, launches, compute_ops, findings = call(inputs)
            verifier_extra_copy = ""
            crep.launches.append(launches)
            for k, v in compute_ops.items():
                crep.compute_ops[k] = crep.compute_ops.get(k, 0) + v
            crep.findings += findings
            t0 = time.monotonic()
            with guard.paused():  # the worker's own write, between two calls of the candidate
                kept = spill.keep(leaves)
            if kept is not leaves:  # inside the call's phase: its wall is counted there too
                clock.add_wall("spill_outputs", time.monotonic() - t0)
            return kept

        trials: list[Any] = []
        try:
            # The case's trial inputs go to the device once: each checked call then copies them
            # device-to-device into its guarded buffers and the timing gets a device clone, instead
            # of a host-to-device copy from pageable memory for every one of the (up to six) calls
            # on trial 0. On `cpu` these are the host tensors themselves, as before. Inside the
            # `try`: running out of device memory here is the forward's runtime error, as it was.
            # `resident_inputs` off: the host tensors, copied to the device in every call (before/after).
            with clock.phase("load_inputs"):
                trials = ([to_device(t_inputs, device) for t_inputs in data["trials"]] if resident_inputs
                          else data["trials"])
            for t_inputs in trials:
                with clock.phase("first_call" if first_call else "trials"):
                    case_out["trials"].append(checked_call(t_inputs))
                first_call = False
            if cjob.recheck:
                with clock.phase("trials"):
                    case_out["recheck"] = checked_call(trials[0])
            if cjob.time and device != "cpu":
                with clock.phase("timing"):
                    # a clone: the timed calls run unguarded, and trial 0 is checked once more below.
                    # Released before that check: held, it was a fourth copy of the inputs beside the
                    # trial and the check's guarded copy and originals (64 GiB for a 16-GiB input on
                    # the H100 of session 25, which then ran out of memory in the verifier's own check).
                    timed_inputs = ([x.clone() if isinstance(x, torch.Tensor) else x for x in trials[0]]
                                    if resident_inputs else trials[0])  # off: _time_candidate copies them
                    verifier_extra_copy = "the timing's clone"
                    crep.timing = measured = _time_candidate(model, timed_inputs, device, cjob.flush_bytes)
                    del timed_inputs
                    verifier_extra_copy = ""
                clock.add_wall("lock_wait", measured.get("lock_wait_s", 0.0))
                clock.add_wall("lock_held", measured.get("lock_held_s", 0.0))
                # results re-checked after timing: one more checked call, compared by the parent
                with clock.phase("post_timing_check"):
                    case_out["post_timing"] = checked_call(trials[0])
        except BaseException as exc:  # noqa: BLE001
            if exc is spill.failure:  # a spill the disk or the file limit refused: judged by the parent
                guard.enabled = False  # the worker writes its report next
                raise
            in_kernel = bool(getattr(exc, "_amdkv_in_kernel", False))
            crep.error = _error_entry(exc, "forward", in_kernel)
            if crep.error.reason == "oom" and not is_host_out_of_memory(crep.error.type, crep.error.message):
                crep.error.message += verifier_copies_note(trials, verifier_extra_copy)
            if bounds is not None and bounds.violation is not None:
                # the refused access is the cause, however the interpreter wrapped it (InterpreterError
                # from inside a launch would otherwise read as compile_error/triton_compile_error)
                err = crep.error
                err.status, err.reason, err.type = "runtime_error", OUT_OF_BOUNDS_ACCESS, "OutOfBoundsAccess"
                err.message = bounds.violation.message
        outputs[cjob.name] = case_out
        if crep.error:
            break
    guard.enabled = False
    report.file_violations = guard.violations
    report.captures = captures
    report.kernels = counter.kernels
    report.stdout_tail = stdout_buf.getvalue()[-2000:]
    with clock.phase("save_outputs"):
        save_for_parent(outputs, job.outputs_path)
    return report


def _time_candidate(model: Any, inputs: list[Any], device: str, flush_bytes: int) -> TimingResult:
    from amdkv.verify import timing

    dev_inputs = to_device(inputs, device)
    wall0 = time.monotonic()
    with torch.no_grad():
        res = timing.measure(lambda: model(*dev_inputs), flush_nbytes=flush_bytes, device=device)
    res["wall_s"] = time.monotonic() - wall0  # the worker's wall clock around it (timing.check_consistency)
    return res
