"""The `Verdict`: the result of verifying one candidate against one task on one platform.

Statuses are a closed, versioned list (DESIGN.md section 1); finer causes go in `reason`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

VERDICT_SCHEMA_VERSION = 1

OK = "ok"
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
MISMATCH = "mismatch"
HACK_DETECTED = "hack_detected"
UNVERIFIABLE = "unverifiable"
INFRA_ERROR = "infra_error"
STATUSES = (OK, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, MISMATCH, HACK_DETECTED, UNVERIFIABLE, INFRA_ERROR)

# Severity order used when several checks fail: the first in this list wins, because a
# candidate caught cheating must never be reported as a mere mismatch, and an infrastructure
# failure must never be blamed on the candidate.
STATUS_PRECEDENCE = (INFRA_ERROR, HACK_DETECTED, COMPILE_ERROR, TIMEOUT, RUNTIME_ERROR, MISMATCH,
                     UNVERIFIABLE, OK)


@dataclasses.dataclass
class CaseResult:
    """Per-case outcome: correctness over seeded trials and, on GPUs, timings."""

    name: str
    tags: list[str]
    status: str = OK
    reason: str | None = None
    trials: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    allowed_abs_err: float | None = None
    ref_err: float | None = None
    message: str | None = None
    ref_ms: float | None = None
    cand_ms: float | None = None
    speedup: float | None = None             # vs eager PyTorch
    speedup_compile: float | None = None     # vs torch.compile
    timing_method: str | None = None
    sol: float | None = None
    min_bytes: int | None = None
    flops: float | None = None


@dataclasses.dataclass
class ArchResources:
    """Resources of one compiled kernel for one target architecture (AMD gfx* or NVIDIA sm_*)."""

    arch: str
    kernel: str
    compiled: bool
    vgpr: int | None = None
    agpr: int | None = None
    sgpr: int | None = None
    vgpr_spill: int | None = None
    sgpr_spill: int | None = None
    scratch_bytes: int | None = None
    lds_bytes: int | None = None
    lds_limit: int | None = None
    occupancy: int | None = None
    config: dict[str, Any] | None = None   # autotune config / constexprs the numbers describe
    error: str | None = None


@dataclasses.dataclass
class Verdict:
    status: str
    reason: str | None = None
    task_id: str | None = None
    language: str | None = None
    platform: str | None = None          # cpu | cuda | rocm | static:<arch>
    device: str | None = None
    compiled: bool | None = None
    correct: bool | None = None
    interpreter_verified: bool = False   # True only for a CPU-interpreter `ok`
    speedup: float | None = None
    speedup_compile: float | None = None
    sol: float | None = None
    cases: list[CaseResult] = dataclasses.field(default_factory=list)
    resources: list[ArchResources] = dataclasses.field(default_factory=list)
    hack_findings: list[str] = dataclasses.field(default_factory=list)
    diagnostics: str = ""
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)  # harness's own phases
    schema_version: int = VERDICT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}; statuses are {STATUSES}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        d = dict(d)
        d["cases"] = [CaseResult(**c) for c in d.get("cases", [])]
        d["resources"] = [ArchResources(**r) for r in d.get("resources", [])]
        return cls(**d)


def worst_status(statuses: list[str]) -> str:
    """The status that wins when several checks disagree (see STATUS_PRECEDENCE)."""
    if not statuses:
        return OK
    return min(statuses, key=STATUS_PRECEDENCE.index)
