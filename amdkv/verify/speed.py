"""Speed of a judged candidate: per-case speedups over the eager and compiled references, the
roofline floor (a time below it is impossible, so `hack_detected`), and the verdict's aggregates.

Moved out of verifier.py unchanged (issue 20: one module per job); `Verifier` gets these methods
by inheriting `SpeedMixin`.
"""

from __future__ import annotations

import math

from amdkv.tasks.types import Task
from amdkv.verify.gpu_specs import time_floor_ms
from amdkv.verify.verdict import HACK_DETECTED, OK, CaseResult, Verdict
from amdkv.verify.worker_protocol import ReferenceCaseReport, TimingResult


class SpeedMixin:
    """The speed half of `Verifier` (uses its `_gpu_spec`)."""

    def _case_speed(self, cres: CaseResult, ref_report: ReferenceCaseReport, cand_timing: TimingResult,
                    task: Task) -> None:
        ref_timing = ref_report.timing
        if ref_timing is None or "ms" not in ref_timing.eager or "ms" not in cand_timing:
            return
        cres.ref_ms, cres.cand_ms = ref_timing.eager["ms"], cand_timing["ms"]
        cres.speedup = cres.ref_ms / cres.cand_ms if cres.cand_ms > 0 else None
        compiled = ref_timing.compile  # None: not timed, or torch.compile failed (compile_error)
        if compiled is not None and "ms" in compiled and cres.cand_ms > 0:
            cres.speedup_compile = compiled["ms"] / cres.cand_ms
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
