"""The messages between the verifier's parent process and its worker processes, typed.

A worker (worker.py) receives ONE job as one JSON line (stdin, or its socket when forked) and
answers with ONE report, a JSON file it writes before saying DONE. Both sides use the dataclasses
below and never a string key: `to_json()` writes every field, and `from_json()` refuses a message
with a field missing or one it does not know, naming the message and the field
(`ProtocolError`). A report the parent cannot read is a harness failure (an `infra_error`
verdict), never the candidate's fault.

Jobs (parent -> worker): `ReferenceJob` (with its `ReferenceCaseJob`s) and `CandidateJob` (with its
`CandidateCaseJob`s and a language backend's `BackendJobPart`). Report (worker -> parent):
`WorkerReport`, which carries how the worker process ran (start-up, sandbox, clocks, CPU) and either
a `ReferenceResult`, a `CandidateResult` or a `WorkerFailure`. A reference case's report
(`ReferenceCaseReport`) is also what the reference cache keeps beside its tensor files.

Two more messages follow the same rules. `WorkerSettings` (parent -> every worker, in the
environment variable `AMDKV_WORKER_SETTINGS`, read before the worker starts up: `worker_settings()`);
one that cannot be read fails the spare's start-up, which the parent reports as a harness failure.
`HipCaptureReport` (the HIP capture worker, backends/hip_capture_worker.py -> backends/hip.py): the
candidate's `load_inline`/`load` calls, recorded without building them.

Values are not type-checked on reading, only the fields' presence: a candidate's report is written
by a process that ran untrusted code, and the parent judges the values it uses itself (e.g.
timing.check_consistency refuses a non-numeric or impossible time as `hack_detected`).
Tensors never travel in these messages: inputs, expected outputs and the candidate's outputs are
`torch.save` files, loaded with `weights_only=True`.

Standard library only: the worker imports this module before the candidate runs, and so does the
parent; nothing heavy may come with it.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, TypeVar, Union

M = TypeVar("M", bound="Message")
R = TypeVar("R", bound="Message")

# One `timing.measure` result (ms, method, calls, loop_wall_s, lock_wait_s, ...): timing.py owns
# its keys, the same dict as benchmarks and the rocprof path use, and the parent reads it only
# through timing.check_consistency and the speed numbers.
TimingResult = dict[str, Any]


class ProtocolError(ValueError):
    """A job or report that does not follow this protocol (a field missing, an unknown one, a kind
    that does not match). It is the harness's failure, never the candidate's."""


class Message:
    """JSON conversion shared by every message (each one a dataclass).

    `KIND`: messages that can stand in one place for another (the two jobs; the two results) carry
    it on the wire as `"kind"`, and reading picks the class by it."""

    KIND: ClassVar[str | None] = None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: _encode(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        return data if self.KIND is None else {"kind": self.KIND, **data}

    def to_json(self, default: Callable[[Any], Any] | None = None) -> str:
        """One line of JSON; `default` as json.dumps's (how to write a value JSON has no type for)."""
        return json.dumps(self.to_dict(), default=default)

    @classmethod
    def from_dict(cls: type[M], data: Any, where: str | None = None) -> M:
        """The message in `data` (a JSON object); ProtocolError when a field is missing or unknown."""
        where = where or cls.__name__
        if not isinstance(data, dict):
            raise ProtocolError(f"{where}: expected a JSON object, got {type(data).__name__}")
        data = dict(data)
        if cls.KIND is not None and data.pop("kind", None) != cls.KIND:
            raise ProtocolError(f"{where}: not a {cls.KIND!r} message")
        types_ = _field_types(cls)
        missing = [name for name in types_ if name not in data]
        unknown = sorted(set(data) - set(types_))
        if missing or unknown:
            raise ProtocolError(f"{where}: " + "; ".join(
                part for part in (f"missing field(s) {missing}" if missing else "",
                                  f"unknown field(s) {unknown}" if unknown else "") if part))
        return cls(**{name: _decode(tp, data[name], f"{where}.{name}") for name, tp in types_.items()})

    @classmethod
    def from_json(cls: type[M], text: str, where: str | None = None) -> M:
        return cls.from_dict(json.loads(text), where)


def _encode(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_encode(v) for v in value]
    return value


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _is_message(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Message)


def _decode(tp: Any, value: Any, where: str) -> Any:
    """`value` read as type `tp`: messages (and lists of them) are built, plain values kept."""
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None and len(options) < len(typing.get_args(tp)):
            return None
        if len(options) == 1:
            return _decode(options[0], value, where)
        if all(_is_message(a) for a in options):
            kind = value.get("kind") if isinstance(value, dict) else None
            chosen = next((a for a in options if a.KIND == kind), None)
            if chosen is None:
                raise ProtocolError(f"{where}: kind {kind!r} is not one of {[a.KIND for a in options]}")
            return chosen.from_dict(value, where)
        return value
    if origin is list and _is_message(typing.get_args(tp)[0]):
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a JSON list, got {type(value).__name__}")
        item = typing.get_args(tp)[0]
        return [item.from_dict(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if _is_message(tp):
        return tp.from_dict(value, where)
    return value


# ------------------------------------------------------------------------------------------- jobs
@dataclass(frozen=True)
class ReferenceCaseJob(Message):
    """One case for the reference worker to compute (worker_jobs.run_reference_job)."""

    name: str  # the task's case (Task.case)
    seeds: list[int]  # one seeded trial per seed: the inputs every candidate will get
    init_seed: int  # torch seed before `Model(*init_inputs)`, so ModelNew gets the same weights
    inputs_file: str  # where to write the inputs (the candidate may read this file)
    expected_file: str  # where to write eager and golden outputs (the candidate may not read it)
    golden: bool  # compute a float64 golden (False: task metadata says its ops have no float64)
    # the float64 golden ran out of memory: True, go on without it (the expected output is then the
    # eager one); False, fail the job as out of memory, so that the reference gate runs it again
    # alone (references.py). The gate's lone re-run sets it: a golden is then dropped only when it
    # does not fit the device even without other references beside it.
    golden_oom_fallback: bool
    time: bool  # time the eager (and compiled) reference: a performance case on a GPU
    flush_bytes: int  # size of the cache-flush buffer for timing (twice the GPU's last-level cache)
    compile_baseline: bool  # also time torch.compile of the reference


@dataclass(frozen=True)
class ReferenceJob(Message):
    """Compute the reference outputs of some cases of one task (trusted code only)."""

    KIND = "reference"
    task_path: str  # the task file, imported by the worker (the candidate never runs here)
    device: str  # the device as the worker sees it (cuda:0 for its one GPU, or cpu)
    cases: list[ReferenceCaseJob]  # the cases missing from the reference cache
    report_path: str  # where the worker writes its WorkerReport


@dataclass(frozen=True)
class CandidateCaseJob(Message):
    """One case for the candidate's worker to run (worker_jobs.run_candidate_job)."""

    name: str  # the task's case, as in the reference cache
    inputs_file: str  # the reference's inputs file, handed into the worker's read-only folder
    recheck: bool  # call again on trial 0's inputs after the trials (catches output caching)
    time: bool  # time ModelNew on this case (a performance case on a GPU)
    flush_bytes: int  # size of the cache-flush buffer for timing


@dataclass(frozen=True)
class HipPrebuilt(Message):
    """One HIP extension the parent built (backends/hip_build.py), in the order the capture saw it:
    the worker's `load_inline`/`load` returns it instead of compiling (backends/hip_run.py)."""

    name: str  # the name the candidate passes to load_inline/load
    so_path: str  # the built module (handed into the worker's read-only folder)
    module_name: str  # the Python module name it was built under


@dataclass(frozen=True)
class BackendJobPart(Message):
    """What a language backend adds to a candidate's job (`run_and_judge`'s `extra_job`)."""

    # program tasks (verify/program.py): the task's own code starts at this line of the candidate
    # file, and its aten ops are not counted as the candidate's
    trusted_from_line: int | None = None
    # HIP on GPUs: the extensions the parent built for this candidate
    hip_prebuilt: list[HipPrebuilt] | None = None

    def handed(self, hand: Callable[[str], str]) -> BackendJobPart:
        """This part with every file it names replaced by `hand(path)` (pool.Spare.hand: the path
        by which the worker reads it)."""
        if self.hip_prebuilt is None:
            return self
        return dataclasses.replace(self, hip_prebuilt=[dataclasses.replace(b, so_path=hand(b.so_path))
                                                       for b in self.hip_prebuilt])


@dataclass(frozen=True)
class CandidateJob(Message):
    """Run the candidate on the reference's inputs with every runtime check on."""

    KIND = "candidate"
    candidate_path: str  # the candidate's text (handed into the worker's read-only folder)
    device: str  # the device as the worker sees it
    interpreter: bool  # Triton's CPU interpreter: patch autotune, check every access's bounds
    cases: list[CandidateCaseJob]  # the cases this platform runs, in order (the job stops at the first error)
    out_dir: str  # the worker's own folder: the one place the candidate may write
    outputs_path: str  # where the worker saves the outputs (protected from the candidate)
    report_path: str  # where the worker writes its WorkerReport (protected from the candidate)
    readable: list[str]  # files the audit hook lets the candidate open besides Python's own
    capture: bool  # record Triton launches for the AMD compile (`--arch`)
    backend: BackendJobPart | None  # the language backend's part, if it has one
    # the GPU memory the candidate may use whatever its share (twice the reference's need; 0: none)
    gpu_mem_floor_bytes: int = 0


WorkerJob = Union[ReferenceJob, CandidateJob]


def job_from_json(line: str) -> WorkerJob:
    """The job on one line, of either kind."""
    return typing.cast(WorkerJob, _decode(WorkerJob, json.loads(line), "job"))


def report_path_of(line: str) -> str:
    """Where to write the report for the job on `line`, read before the rest of the job, so that a
    job which fails to parse is still answered (by a report with `fatal` set)."""
    data = json.loads(line)
    path = data.get("report_path") if isinstance(data, dict) else None
    if not isinstance(path, str):
        raise ProtocolError("job: no report_path")
    return path


# ---------------------------------------------------------------------------------------- reports
@dataclass
class ReferenceTiming(Message):
    """The reference's baselines on one performance case, timed once per GPU and cached."""

    eager: TimingResult  # PyTorch eager: the speedup's denominator
    compile: TimingResult | None  # torch.compile (None: not asked, or it failed)
    compile_error: str | None  # why torch.compile could not be timed (the baseline is then missing)


# the reference worker's steps per case, timed (ReferenceCaseReport.phase_s)
REFERENCE_PHASES = ("make_inputs", "eager", "golden", "reproducible", "timing", "save")


@dataclass
class ReferenceCaseReport(Message):
    """What the reference worker found on one case; cached as the case's `report.json`."""

    name: str  # the case it answers (the parent matches reports to cases by name)
    input_dtypes: list[str]  # of the first trial's inputs (bf16 is unjudgeable on the interpreter)
    output_dtypes: list[str]  # of its outputs, mutated inputs included
    mutated: list[int]  # inputs the reference changes in place: extra outputs the candidate must match
    min_bytes: int  # bytes the case must move at least (roofline floor)
    golden_available: bool  # a float64 golden was computed (else tolerances use eager alone)
    golden_error: str | None  # why the golden could not be computed
    timing: ReferenceTiming | None  # None: not a timed case
    seconds: float  # wall time of this case in the worker
    # GPU bytes one eager forward of the reference needed: its weights, one trial's inputs and the
    # forward's own peak above what was already allocated (0: not a GPU). A candidate may use twice
    # this, even past its share of the GPU (verify/gpu_memory.py)
    gpu_need_bytes: int
    # bytes of one trial's eager outputs (mutated inputs included): what one checked call of a correct
    # candidate writes, so the disk a candidate needs is known beside its expected-outputs file
    # (disk_admission.candidate_disk_need: at one trial that file can be smaller than its calls' outputs)
    output_bytes: int
    # wall seconds of this case's steps in the worker (REFERENCE_PHASES): KernelBench's largest took 29-40 s
    # on the H100 in session 23 with nothing to say which step; surfaced as `reference_<phase>_s` timings
    phase_s: dict[str, float]


@dataclass
class ReferenceResult(Message):
    """A reference job's result: one report per case, in the job's order."""

    KIND = "reference"
    cases: list[ReferenceCaseReport]  # what the parent caches and judges against


@dataclass
class Finding(Message):
    """A runtime witness against one checked call (input mutation, aliasing, guard bytes, ...)."""

    code: str  # judging.RUNTIME_ERROR_FINDINGS are broken kernels, the rest hack_detected
    message: str  # which input or output, for the verdict's message


@dataclass
class CandidateError(Message):
    """An exception that escaped the candidate's code, classified in the worker."""

    stage: str  # import, init (ModelNew construction) or forward
    status: str  # the verdict status it means (compile_error, runtime_error, hack_detected)
    reason: str  # the verdict reason (syntax_error, oom, out_of_bounds_access, exception:<type>, ...)
    type: str  # the exception's class name
    message: str  # the exception's text (cut to 1500 characters), for the verdict's message
    traceback: str  # its end, for the verdict's diagnostics


@dataclass
class CandidateCaseReport(Message):
    """What the worker saw on one case; the outputs themselves are in the outputs file."""

    name: str  # the case it answers (a case with no report was not run)
    launches: list[int]  # kernel launches per checked call (0: that call launched none)
    compute_ops: dict[str, int]  # aten ops run by Python code outside launches, with counts
    findings: list[Finding]  # runtime witnesses over every checked call of the case
    error: CandidateError | None  # the case stopped here (the job stops at the first such case)
    timing: TimingResult | None  # ModelNew's time (with the worker's `wall_s`), None when not timed


@dataclass
class CandidateResult(Message):
    """A candidate job's result."""

    KIND = "candidate"
    cases: list[CandidateCaseReport]  # the cases reached, in the job's order
    error: CandidateError | None  # the candidate failed before any case (import, no ModelNew)
    file_violations: list[str]  # what the audit hook refused: a sandbox violation
    captures: list[dict[str, Any]]  # Triton launches for the AMD compile (amd/triton_capture.py's format)
    kernels: dict[str, int]  # launches per kernel name (not judged: for reading a report by hand)
    stdout_tail: str  # the end of what the candidate printed (not judged: for reading a report by hand)
    import_s: float | None  # the candidate's import (None: it failed); also in phase_s
    phase_s: dict[str, float]  # wall seconds per job phase: verdict timings worker_<phase>_s
    phase_cpu_s: dict[str, float]  # host CPU per phase: worker_<phase>_cpu_s
    phase_children_cpu_s: dict[str, float]  # compilers' (gcc, ptxas) share: worker_<phase>_children_cpu_s
    # argument signatures of the Triton launchers built in the job (untrusted: triton_launchers.py
    # validates them before the parent builds any)
    launcher_signatures: list[list[str]]


class OutputWriteError(OSError):
    """A worker could not write a file the parent reads (reference inputs and outputs, a candidate's
    outputs): the machine's failure (a disk that filled during the write, a file-size limit), never
    the task's or the candidate's. Its name travels as `WorkerFailure.error_type`; `limit_bytes` (and
    FILE_SIZE_LIMITED in the message) says the worker's per-file limit was the cause, and which: the
    parent judges a candidate's write past a limit that holds every correct output of its task as the
    candidate's (judging.py, `outputs_too_large`)."""

    limit_bytes: int | None = None  # the per-file limit (RLIMIT_FSIZE) the write passed; None: not the cause


FILE_SIZE_LIMITED = "the worker's file-size limit"


@dataclass
class WorkerFailure(Message):
    """The worker itself failed: the job could not be read or raised outside the candidate's
    guarded code. A harness failure (infra_error; for a reference, ReferenceFailed)."""

    error_type: str  # the exception's class name
    error: str  # its text (cut to 2000 characters)
    traceback: str  # its end: what the infra_error's diagnostics show
    file_size_limit_bytes: int | None = None  # an OutputWriteError's limit_bytes: the per-file limit it passed


@dataclass
class WorkerReport(Message):
    """Everything a worker says about its one job: the result (or its own failure) and how the
    process ran. CLOCK_MONOTONIC stamps are one clock for every process on Linux, so the parent
    subtracts them from its own (verdict timings job_handoff_s, done_handoff_s)."""

    result: ReferenceResult | CandidateResult | None  # None exactly when `fatal` is set
    fatal: WorkerFailure | None  # the worker's own failure: infra_error, or ReferenceFailed
    startup_s: float  # the spare's start-up, paid before the job: worker_startup_s
    startup_parts: dict[str, float]  # its steps' wall and CPU seconds: worker_startup_<part>
    sandbox: dict[str, Any]  # what the OS sandbox held (os_sandbox.APPLIED): verdict env.sandbox
    job_s: float  # the job inside the worker: worker_job_s
    cpu_s: float  # the process's host CPU, start-up and compilers included: worker_cpu_s
    job_cpu_s: float  # the same for the job alone: worker_job_cpu_s
    # the job's peak of PyTorch-allocated GPU memory, summed over the process's devices (0 on the CPU):
    # worker_gpu_peak_gib. Read it, never judge by it: a candidate in the same process can reset the counter
    gpu_peak_bytes: int
    job_received_at: float  # monotonic time the worker had the job
    reported_at: float  # monotonic time the report was complete

    def __post_init__(self) -> None:
        if (self.result is None) == (self.fatal is None):
            raise ProtocolError("WorkerReport: exactly one of result and fatal must be set")

    def result_of(self, kind: type[R]) -> R:
        """The result, which must be of `kind` (the job's): ProtocolError otherwise."""
        if not isinstance(self.result, kind):
            raise ProtocolError(f"WorkerReport: expected a {kind.__name__}, got "
                                f"{type(self.result).__name__ if self.result is not None else 'a fatal failure'}")
        return self.result


# -------------------------------------------------------------------------------------- settings
WORKER_SETTINGS_ENV = "AMDKV_WORKER_SETTINGS"  # parent -> worker channel (not a user setting)


@dataclass(frozen=True)
class WorkerSettings(Message):
    """A worker's settings: its part of the run's VerifierConfig (the fields marked `worker`) and
    its own facts from the pool. Written by pool.worker_env into `AMDKV_WORKER_SETTINGS`; read by
    `worker_settings()`. The defaults are VerifierConfig's (a test holds them equal): what a worker
    started by hand, with no such variable, runs with."""

    device: str = "cpu"  # the device as the worker sees it (cuda:0 for its one GPU, or cpu)
    visible_gpus: int | None = None  # GPUs the worker must see (1 on GPUs: checked at start-up)
    timing_lock: str | None = None  # the per-GPU lock file timed sections hold (GPUs only)
    gpu_mem_fraction: float | None = None  # a candidate's share of GPU memory (None: no cap)
    timing_method: str = "auto"  # VerifierConfig.timing_method
    small_kernel_ms: float = 0.1  # VerifierConfig.small_kernel_ms
    small_kernel_method: str = "profiler"  # VerifierConfig.small_kernel_method
    prewarm_profiler: bool = True  # VerifierConfig.prewarm_profiler
    blocking_sync: bool = True  # VerifierConfig.blocking_sync
    resident_inputs: bool = True  # VerifierConfig.resident_inputs
    spill_outputs_mib: float = 4096.0  # VerifierConfig.spill_outputs_mib
    worker_threads: int | None = None  # VerifierConfig.worker_threads


def worker_settings() -> WorkerSettings:
    """Inside a worker process: the settings its parent wrote (the defaults when there are none,
    e.g. a worker started by hand in a test); ProtocolError naming the field when unreadable."""
    return _settings_from(os.environ.get(WORKER_SETTINGS_ENV) or "")


@functools.lru_cache(maxsize=8)
def _settings_from(text: str) -> WorkerSettings:
    return WorkerSettings.from_json(text, f"WorkerSettings ({WORKER_SETTINGS_ENV})") if text else WorkerSettings()


# ---------------------------------------------------------------------------------- HIP capture
@dataclass(frozen=True)
class HipCaptureReport(Message):
    """What the HIP capture worker (backends/hip_capture_worker.py) saw while importing a HIP
    candidate with `load_inline`/`load` stubbed: its OUT.json, read by backends/hip.py. Like a
    WorkerReport it is written by a process that ran the candidate: fields are checked, values not."""

    # one per call, in order: hip_capture_worker's format (`api`, `name`, sources, flags), read by
    # hip_sources.py, hip_units.py, hip_build.py and hip_semantics.py
    captures: list[dict[str, Any]]
    import_error: str | None  # the import raised (its traceback's end); calls before it are captured
    init_error: str | None  # `ModelNew(*get_init_inputs())` raised (harmless: the stubs cannot run)
