"""`SampleResult`: one verified candidate, reduced to what the metrics need.

Metrics never see a full `Verdict`; they see these plain records, so that `amdkv eval`, the
`evaluate` modules and ad-hoc notebooks can all feed them (from verdict dicts, JSONL files or
by hand). Records are validated when built, so a malformed verdict fails here with a message
instead of turning into a silently wrong number later.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from amdkv.metrics.errors import MetricInputError

# The closed, versioned status list of DESIGN.md section 1.
STATUSES = ("ok", "compile_error", "runtime_error", "timeout", "mismatch", "hack_detected",
            "unverifiable", "infra_error")

# Statuses that say nothing about the candidate: such samples are left out of every metric
# (and counted in the report). `infra_error` is the harness's fault, `unverifiable` means the
# platform could not judge the candidate.
UNJUDGED_STATUSES = ("infra_error", "unverifiable")

UNKNOWN = "unknown"  # group label used for a missing level / op_family / dtype / platform


def _opt_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_":  # numpy.bool_, without importing numpy here
        return bool(value)
    raise MetricInputError(f"{name} must be True, False or None, got {value!r}",
                           hint=f"pass {name} as a bool (None when unknown)")


def _opt_number(name: str, value: Any, *, positive: bool) -> float | None:
    if value is None:
        return None
    numeric = isinstance(value, (int, float)) or hasattr(value, "__float__")
    if isinstance(value, bool) or not numeric:
        raise MetricInputError(f"{name} must be a number or None, got {value!r}",
                               hint=f"pass {name} as a float (None when it was not measured)")
    x = float(value)
    if not math.isfinite(x) or (x <= 0 if positive else x < 0):
        bound = "> 0" if positive else ">= 0"
        raise MetricInputError(f"{name} = {value!r} is not a finite number {bound}",
                               hint=f"record None when {name} was not measured, never 0, NaN or inf")
    return x


def _opt_int(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise MetricInputError(f"{name} must be a non-negative int, got {value!r}",
                               hint=f"pass {name} as an int")
    v = int(value)
    if v < 0:
        raise MetricInputError(f"{name} = {v} is negative", hint=f"number {name} from 0 up")
    return v


@dataclasses.dataclass(frozen=True)
class SampleResult:
    """The verdict of one candidate for one task on one platform.

    `sample_index` numbers independent samples (or agent runs) of a task; `turn` numbers the
    refinement turns inside one agent run (None for single-shot samples, which are then runs of
    one turn). `speedup` is t_ref / t_cand; `sol` the fraction of the roofline reached.
    `level`, `op_family` and `dtype` describe the task and must agree across its samples.
    """

    task_id: str
    sample_index: int
    turn: int | None = None
    compiled: bool | None = None
    correct: bool | None = None
    status: str | None = None
    speedup: float | None = None
    sol: float | None = None
    platform: str | None = None
    level: int | str | None = None
    op_family: str | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise MetricInputError(f"task_id must be a non-empty string, got {self.task_id!r}",
                                   hint="use the task's id from its METADATA / file name")
        set_ = object.__setattr__  # frozen: normalise values in place once
        idx = _opt_int("sample_index", self.sample_index)
        if idx is None:
            raise MetricInputError(f"sample_index is required (task {self.task_id})",
                                   hint="number the samples of each task 0, 1, 2, ...")
        set_(self, "sample_index", idx)
        set_(self, "turn", _opt_int("turn", self.turn))
        set_(self, "compiled", _opt_bool("compiled", self.compiled))
        set_(self, "correct", _opt_bool("correct", self.correct))
        set_(self, "speedup", _opt_number("speedup", self.speedup, positive=True))
        set_(self, "sol", _opt_number("sol", self.sol, positive=False))
        if self.status is not None and self.status not in STATUSES:
            raise MetricInputError(
                f"unknown status {self.status!r} for task {self.task_id} sample {idx}",
                hint=f"use one of {', '.join(STATUSES)} (finer causes belong in `reason`)")

    # -- how the metrics read a sample (documented in docs/metrics.md) ------------------------
    @property
    def judged(self) -> bool:
        """False for infra_error / unverifiable: the sample says nothing about the candidate."""
        return self.status not in UNJUDGED_STATUSES

    @property
    def is_correct(self) -> bool:
        """Correct means `correct is True` and a status that agrees (ok, or no status given)."""
        return self.judged and self.correct is True and self.status in (None, "ok")

    @property
    def is_compiled(self) -> bool:
        """`compiled is True`; when `compiled` is unknown, a correct sample evidently built."""
        if not self.judged:
            return False
        return self.compiled is True or (self.compiled is None and self.is_correct)

    @property
    def platform_label(self) -> str:
        return self.platform if self.platform is not None else UNKNOWN

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (the fields, by name)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SampleResult":
        """Inverse of `to_dict`; unknown keys are an error so typos do not vanish."""
        names = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(d) - names)
        if extra:
            raise MetricInputError(f"unknown SampleResult field(s) {extra}",
                                   hint=f"allowed fields: {sorted(names)}")
        return cls(**dict(d))


def _task_dtype(task_meta: Mapping[str, Any]) -> str | None:
    """`dtype` as given, else `dtypes` (a Task's tuple) joined with '+' in a stable order."""
    if task_meta.get("dtype") is not None:
        return str(task_meta["dtype"])
    dtypes = task_meta.get("dtypes")
    if dtypes is None or isinstance(dtypes, str):
        return dtypes
    dtypes = sorted(str(d) for d in dtypes)
    return "+".join(dtypes) if dtypes else None


def from_verdict_dict(task_meta: Mapping[str, Any], verdict: Mapping[str, Any],
                      sample_index: int, turn: int | None = None) -> SampleResult:
    """Build a `SampleResult` from a task's metadata and a verdict dict.

    `task_meta` needs `id` (or `task_id`) and may have `level`, `op_family` and `dtype` (or a
    `dtypes` list, as in `Task.summary()`). From the verdict the keys `status`, `compiled`,
    `correct`, `speedup`, `sol` and `platform` are read; a missing key reads as None.
    """
    task_id = task_meta.get("task_id", task_meta.get("id"))
    if task_id is None:
        raise MetricInputError("task metadata has neither `id` nor `task_id`",
                               hint="pass Task.summary() or a dict with the task's id")
    return SampleResult(
        task_id=str(task_id), sample_index=sample_index, turn=turn,
        compiled=verdict.get("compiled"), correct=verdict.get("correct"),
        status=verdict.get("status"), speedup=verdict.get("speedup"), sol=verdict.get("sol"),
        platform=verdict.get("platform"), level=task_meta.get("level"),
        op_family=task_meta.get("op_family"), dtype=_task_dtype(task_meta))
