"""Automatic checks of a task's reference program: it runs, it is deterministic, and its outputs
are not degenerate (not constant, not all zero, no NaN/Inf).

Shared by the procedural suites (amdkv.tasks.procedural.checks, in trusted batch workers) and by
corpus ingestion (amdkv.tasks.ingest.check_worker, in a sandboxed process per row). The reference
runs through the verifier's own reference job (amdkv.verify.worker_jobs.run_reference_job), so
the cases, seeds, init seed, float64 golden and input-mutation rules are exactly the verifier's;
"deterministic" means a second run with the same seeds gives the same inputs and outputs, bit for
bit. Call only in a process that may run the task's code.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any

from amdkv.tasks.types import Task

if TYPE_CHECKING:  # the verifier is imported where the job runs, not with this module
    from amdkv.verify.worker_protocol import ReferenceJob

# Reasons a reference fails its checks (closed list, documented in docs/procedural_tasks.md).
REFERENCE_ERROR = "reference_error"
NONDETERMINISTIC = "nondeterministic"
NON_FINITE = "non_finite_output"
ALL_ZERO = "all_zero_output"
CONSTANT = "constant_output"
NO_TENSOR = "no_tensor_output"
NO_CASES = "no_correctness_cases"
LOW_VARIETY = "low_variety_output"


@dataclasses.dataclass
class ReferenceCheck:
    """Outcome of the reference checks; on success, the files the verifier would use (inputs and
    expected outputs per case) so a solution can be judged against the very same data."""

    ok: bool
    reason: str | None = None
    message: str = ""
    cases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # name -> {inputs, expected}
    input_dtypes: list[str] = dataclasses.field(default_factory=list)
    output_shapes: list[list[int]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def _job(task: Task, case_names: list[str], seeds: list[int], init_seed: int, workdir: str, tag: str,
         golden: bool) -> ReferenceJob:
    from amdkv.verify.worker_protocol import ReferenceCaseJob, ReferenceJob

    # (no reference gate here: a golden that does not fit is dropped, as the gate's lone re-run drops it)
    cases = [ReferenceCaseJob(name=n, seeds=seeds, init_seed=init_seed, golden=golden, golden_oom_fallback=True,
                              time=False, flush_bytes=0,
                              compile_baseline=False, inputs_file=os.path.join(workdir, f"{tag}-{i}-inputs.pt"),
                              expected_file=os.path.join(workdir, f"{tag}-{i}-expected.pt"))
             for i, n in enumerate(case_names)]
    # report_path: where a worker would write its report; the job runs in this process, which writes none
    return ReferenceJob(task_path=task.path, device="cpu", cases=cases,
                        report_path=os.path.join(workdir, f"{tag}-report.json"))


def _same(a: Any, b: Any) -> bool:
    """Bitwise equality of nested lists of tensors / plain values."""
    import torch

    from amdkv.verify.compare import bitwise_equal

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and bitwise_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def degenerate_output(calls: list[list[Any]], min_distinct: int = 2) -> tuple[str, str] | None:
    """(reason, message) when an output is degenerate over all the calls given, else None.

    `calls` holds the output leaves of every call (case x trial). An output leaf is judged over
    every call at once, so a loss scalar that differs between seeds is not "constant", while a
    tensor that is the same value everywhere in every call is.
    `min_distinct` > 2 also refuses outputs with fewer distinct values than that (at most a quarter
    of the elements), e.g. a tanh saturated to +-1: for generated tasks, whose outputs should vary."""
    import torch

    leaves = list(zip(*calls)) if calls else []
    tensors = [(i, [t for t in leaf if isinstance(t, torch.Tensor)]) for i, leaf in enumerate(leaves)]
    tensors = [(i, ts) for i, ts in tensors if ts and all(t.numel() for t in ts)]
    if not tensors:
        return NO_TENSOR, "the reference returns no non-empty tensor"
    for i, ts in tensors:
        flat = torch.cat([t.reshape(-1).to(torch.float64) for t in ts])
        if not bool(torch.isfinite(flat).all()):
            return NON_FINITE, f"output {i} has NaN/Inf values ({int((~torch.isfinite(flat)).sum())} of {flat.numel()})"
        if not bool(flat.any()):
            return ALL_ZERO, f"output {i} is all zeros"
        if bool((flat == flat[0]).all()):
            return CONSTANT, f"output {i} is the constant {float(flat[0]):.6g}"
        distinct = int(torch.unique(flat).numel())
        if distinct < min(min_distinct, max(2, flat.numel() // 4)):
            return LOW_VARIETY, f"output {i} has only {distinct} distinct values in {flat.numel()} elements"
    return None


def check_reference(task: Task, *, trials: int, workdir: str, base_seed: int | None = None,
                    init_seed: int | None = None, case_names: list[str] | None = None,
                    min_distinct: int = 2) -> ReferenceCheck:
    """Run the task's correctness cases twice with the verifier's seeds and judge the outputs."""
    import torch

    from amdkv.verify.verifier import BASE_SEED, INIT_SEED
    from amdkv.verify.worker_jobs import run_reference_job

    t0 = time.monotonic()
    names = case_names if case_names is not None else [c.name for c in task.cases_tagged("correctness")]
    if not names:
        return ReferenceCheck(False, NO_CASES, "the task has no correctness case", seconds=time.monotonic() - t0)
    seeds = [(BASE_SEED if base_seed is None else base_seed) + i for i in range(trials)]
    init = INIT_SEED if init_seed is None else init_seed
    runs = []
    try:
        for tag in ("first", "second"):  # the second run only has to repeat the eager outputs
            job = _job(task, names, seeds, init, workdir, tag, golden=tag == "first")
            report = run_reference_job(job)
            loaded = {c.name: {"inputs": torch.load(c.inputs_file, weights_only=True),
                               "expected": torch.load(c.expected_file, weights_only=True),
                               "report": rep}
                      for c, rep in zip(job.cases, report.cases)}
            runs.append(loaded)
    except Exception as exc:  # noqa: BLE001 - the task's own code failed: that is the finding
        return ReferenceCheck(False, REFERENCE_ERROR, f"{type(exc).__name__}: {exc}"[:1500],
                              seconds=time.monotonic() - t0)
    first, second = runs
    for name in names:
        a, b = first[name], second[name]
        if not _same(a["inputs"]["trials"], b["inputs"]["trials"]):
            return ReferenceCheck(False, NONDETERMINISTIC, f"case {name}: inputs differ between two runs with "
                                  "the same seeds (draw them from torch's global RNG)", seconds=time.monotonic() - t0)
        if not _same(a["expected"]["eager"], b["expected"]["eager"]):
            return ReferenceCheck(False, NONDETERMINISTIC, f"case {name}: outputs differ between two runs with "
                                  "the same seeds and inputs", seconds=time.monotonic() - t0)
    # Degeneracy is a property of the task, judged over every case and trial at once: a reduction
    # over 3 rows can be all zeros after a relu by chance in one case, a degenerate task in all.
    bad = degenerate_output([out for n in names for out in first[n]["expected"]["eager"]], min_distinct)
    if bad:
        return ReferenceCheck(False, bad[0], f"over every correctness case and trial: {bad[1]}",
                              seconds=time.monotonic() - t0)
    rep = first[names[0]]["report"]
    shapes = [list(t.shape) for t in first[names[0]]["expected"]["eager"][0] if isinstance(t, torch.Tensor)]
    return ReferenceCheck(True, cases={n: {"inputs": first[n]["inputs"], "expected": first[n]["expected"]} for n in names},
                          input_dtypes=rep.input_dtypes, output_shapes=shapes, seconds=time.monotonic() - t0)
