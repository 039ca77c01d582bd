"""Speed of a judged candidate: per-case speedups over the eager and compiled references, the
roofline floor (a time below it is impossible, so `hack_detected`), and the verdict's aggregates.

Moved out of verifier.py unchanged (issue 20: one module per job); `Verifier` gets these methods
by inheriting `SpeedMixin`.
"""

from __future__ import annotations

import math
from typing import Any

from amdkv.tasks.types import Task
from amdkv.verify.gpu_specs import time_floor_ms
from amdkv.verify.verdict import HACK_DETECTED, OK, CaseResult, Verdict


class SpeedMixin:
    """The speed half of `Verifier` (uses its `_gpu_spec`)."""

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
