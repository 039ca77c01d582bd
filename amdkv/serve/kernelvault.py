"""AMDKernelVault's execution protocol (version 1) on top of amdkv's verdicts, so RL stacks written
for it can use an `amdkv serve` service unchanged.

Their contract (AMD-AGI/AMDKernelVault, rl/rl4kernel_triton/EXECUTION_PROTOCOL.md and
src/triton_rl/evaluation/protocol.py): `POST /evaluate` with exactly `{"protocol_version": 1,
"code", "filename", "atol", "rtol"}`; a 200 answer is exactly `{"protocol_version": 1, "result":
{compiled, correct, speedup, latency_ms, baseline_latency_ms, feedback, error_type, diagnostics}}`
with booleans for compiled/correct, correct implying compiled, and the three numbers finite and
positive or null, and null unless correct. Transport and infrastructure failures are errors
(non-200 with `{"protocol_version": 1, "error": {"type", "message"}}`), never results: their client
raises on them instead of making a zero reward.

How amdkv answers it:
- `filename` names a task of the served suite (`<task_id>.py` or `<suite>/<task_id>.py`).
- `atol`/`rtol` are recorded in `diagnostics.requested_tolerance` and never used: amdkv's
  tolerance policy (docs/verifier.md) judges every candidate the same way, and a client must not
  be able to loosen it.
- `correct` = the verdict is `ok`; `compiled` = the verdict says it compiled (an `ok` always has).
- `speedup` = amdkv's task speedup (geometric mean over performance cases of eager-reference time
  over candidate time, timed as docs/gpu.md says), not their arithmetic mean of per-operator
  ratios; `latency_ms` / `baseline_latency_ms` = sums over the performance cases. All null on
  the CPU platform (no timings there) and for incorrect candidates.
- `error_type` = the verdict's status (`compile_error`, `mismatch`, `hack_detected`, ...), its
  `reason` in diagnostics; `feedback` = the verdict's diagnostics.
- An `infra_error` verdict is HTTP 500 (type `infrastructure_error`), a passed deadline 504, and
  an `unverifiable` verdict (the platform cannot judge it, e.g. bf16 on the CPU interpreter) HTTP
  422 (type `unverifiable`): their result has no "not judged" value, and reporting it as
  incorrect would turn the platform's limit into a zero reward.
- `diagnostics` names the platform and device, so an NVIDIA number is never read as an AMD one.
"""

from __future__ import annotations

import math
from typing import Any

from amdkv.serve.protocol import AKV_PROTOCOL_VERSION, error_object, finite_or_none
from amdkv.serve.service import Outcome
from amdkv.verify.verdict import INFRA_ERROR, OK, UNVERIFIABLE, Verdict

FEEDBACK_CHARS = 16000
SPEEDUP_AGGREGATION = "geometric mean over performance cases of eager-reference ms / candidate ms (amdkv)"


def _positive(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) and x > 0 else None


def evaluation_result(verdict: Verdict, *, atol: float, rtol: float) -> dict[str, Any]:
    """Their `EvaluationResult` for one judged verdict (not infra_error, not unverifiable)."""
    correct = verdict.status == OK
    perf = [c for c in verdict.cases if "performance" in c.tags]
    speedup = latency = baseline = None
    if correct:
        speedup = _positive(verdict.speedup)
        cand = [_positive(c.cand_ms) for c in perf]
        ref = [_positive(c.ref_ms) for c in perf]
        if perf and None not in cand and None not in ref:
            latency, baseline = sum(cand), sum(ref)
    feedback = (verdict.diagnostics or verdict.reason or verdict.status)
    if len(feedback) > FEEDBACK_CHARS:
        feedback = feedback[: FEEDBACK_CHARS // 3] + "\n[...]\n" + feedback[-(2 * FEEDBACK_CHARS) // 3:]
    diagnostics = {
        "engine": "amdkv", "task_id": verdict.task_id, "status": verdict.status, "reason": verdict.reason,
        "platform": verdict.platform, "device": verdict.device, "is_amd": verdict.platform == "rocm",
        "interpreter_verified": verdict.interpreter_verified, "speedup_aggregation": SPEEDUP_AGGREGATION,
        "speedup_compile": verdict.speedup_compile, "sol": verdict.sol,
        "cases": [{"name": c.name, "tags": c.tags, "status": c.status, "reason": c.reason, "ref_ms": c.ref_ms,
                   "cand_ms": c.cand_ms, "speedup": c.speedup, "timing_method": c.timing_method,
                   "max_abs_err": c.max_abs_err, "allowed_abs_err": c.allowed_abs_err} for c in verdict.cases],
        "hack_findings": verdict.hack_findings[:20],
        "requested_tolerance": {"atol": atol, "rtol": rtol, "applied": False,
                                "note": "amdkv's tolerance policy judges every candidate (docs/verifier.md); "
                                        "requested tolerances are recorded, never used to loosen it"},
        "candidate_sha256": verdict.candidate_sha256, "cache_hit": verdict.cache_hit,
        "verdict_schema": verdict.schema_version,
    }
    return {"compiled": bool(verdict.compiled) or correct, "correct": correct, "speedup": speedup,
            "latency_ms": latency, "baseline_latency_ms": baseline, "feedback": feedback,
            "error_type": None if correct else verdict.status, "diagnostics": finite_or_none(diagnostics)}


def evaluate_outcome(outcome: Outcome, *, atol: float, rtol: float) -> Outcome:
    """Their answer for one of ours (a verdict, or the error of a passed deadline)."""
    verdict = outcome.body.get("verdict")
    if outcome.status != 200 or verdict is None:
        err = outcome.body.get("error") or error_object("internal_error", "no verdict")
        return Outcome(outcome.status, error_body(err), outcome.headers)
    v = Verdict.from_dict(verdict)
    if v.status == INFRA_ERROR:
        return Outcome(500, error_body(error_object(
            "internal_error", f"the verifier failed ({v.reason}): {v.diagnostics[-2000:]}",
            "infrastructure, not the candidate: retry later or on another service")))
    if v.status == UNVERIFIABLE:
        return Outcome(422, error_body(error_object(
            "unverifiable", f"the {v.platform} platform cannot judge this candidate ({v.reason}): {v.diagnostics[-1000:]}",
            "verify it on an AMD GPU service (rocm); it is neither correct nor incorrect here")))
    return Outcome(200, {"protocol_version": AKV_PROTOCOL_VERSION,
                         "result": evaluation_result(v, atol=atol, rtol=rtol)})


def error_body(error: dict[str, Any]) -> dict[str, Any]:
    return {"protocol_version": AKV_PROTOCOL_VERSION, "error": error}
