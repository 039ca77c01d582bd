"""The `Verdict`: the result of verifying one candidate against one task on one platform.

Statuses are a closed, versioned list (DESIGN.md section 1); finer causes go in `reason`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

# Re-exported: part of every Verdict, and callers import it from here. It lives in amdkv.archs so
# that the HIP toolchain (which builds it from compiler remarks) need not import the verifier.
from amdkv.archs import ArchResources

# 2: `candidate_sha256`, `cache_hit`, `cache_key`; the invariants of `enforce_invariants` hold.
VERDICT_SCHEMA_VERSION = 2

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
# Statuses that judge the candidate wrong: `correct` is False on every platform.
FAILING = (COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, MISMATCH, HACK_DETECTED)
# Statuses that say nothing about the candidate's correctness: `correct` is None.
NO_JUDGEMENT = (UNVERIFIABLE, INFRA_ERROR)


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
    candidate_sha256: str | None = None  # sha256 of the exact source judged (callers can check it)
    cache_hit: bool = False              # True: reused from the verdict cache, not run again
    cache_key: str | None = None         # the verdict-cache key (task, candidate, platform, config)
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
        """A verdict from `to_dict()` output, of this or an earlier schema version (fields added
        since take their defaults)."""
        d = dict(d)
        d["cases"] = [CaseResult(**c) for c in d.get("cases", [])]
        d["resources"] = [ArchResources(**r) for r in d.get("resources", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"verdict has unknown field(s) {unknown} (schema version {d.get('schema_version')}; "
                             f"this amdkv reads up to {VERDICT_SCHEMA_VERSION}): upgrade amdkv")
        return cls(**d)

    def enforce_invariants(self) -> "Verdict":
        """Make `correct` and `compiled` agree with `status` (tested over every status):

        - `ok`: correct True, compiled True;
        - a failing status (compile_error, runtime_error, timeout, mismatch, hack_detected): correct
          False on every platform (compile-only platforms included);
        - `unverifiable`, `infra_error`: correct None (the candidate was not judged);
        - compile_error: compiled False; `compiled` stays None only when no compile was attempted
          (e.g. a static anti-hack rejection, a timeout before anything built, an infra_error).
        `interpreter_verified` is True only for an `ok` that says so."""
        if self.status == OK:
            self.correct, self.compiled = True, True
        elif self.status in FAILING:
            self.correct = False
        else:
            self.correct = None
        if not compiled_after(self.status):
            self.compiled = False
        if self.status != OK:
            self.interpreter_verified = False
        return self


def compiled_after(status: str) -> bool:
    """The one rule for `compiled` once the candidate's code was built or imported and then failed or
    passed with `status`: it compiled unless the failure is a compile_error. (Whether a compile was
    attempted at all is the caller's knowledge: `compiled` stays None when none was.)"""
    return status != COMPILE_ERROR


def infra_error_verdict(reason: str, diagnostics: str, *, task_id: str | None = None, language: str | None = None,
                        platform: str | None = None, device: str | None = None,
                        candidate_sha256: str | None = None) -> Verdict:
    """The one way any verifier (local, HTTP client, Ray, the RL reward) reports its own failure:
    `infra_error` with a `reason` code, never a candidate fault. `language` "auto" (not yet
    detected) is recorded as None."""
    return Verdict(status=INFRA_ERROR, reason=reason, task_id=task_id,
                   language=None if language == "auto" else language, platform=platform, device=device,
                   diagnostics=diagnostics, candidate_sha256=candidate_sha256).enforce_invariants()


def worst_status(statuses: list[str]) -> str:
    """The status that wins when several checks disagree (see STATUS_PRECEDENCE)."""
    if not statuses:
        return OK
    return min(statuses, key=STATUS_PRECEDENCE.index)
