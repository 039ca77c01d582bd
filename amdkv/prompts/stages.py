"""Stages of a multi-turn attempt: what a request asks the model to do.

`write` starts every attempt; after each turn the outcome picks the next stage (a closed list,
like verdict statuses; see amdkv.prompts.feedback for what each one shows). Plain strings, so they
go into records and dataset columns as they are.
"""

from __future__ import annotations

from amdkv.errors import BadInputError
from amdkv.verify.verdict import (COMPILE_ERROR, HACK_DETECTED, INFRA_ERROR, MISMATCH, OK, RUNTIME_ERROR, TIMEOUT,
                                  UNVERIFIABLE)

WRITE = "write"
FIX_FORMAT = "fix_format"      # no program could be extracted from the reply
FIX_COMPILE = "fix_compile"
FIX_RUNTIME = "fix_runtime"    # runtime_error and timeout
FIX_MISMATCH = "fix_mismatch"
FIX_HACK = "fix_hack"
OPTIMISE = "optimise"
STAGES = (WRITE, FIX_FORMAT, FIX_COMPILE, FIX_RUNTIME, FIX_MISMATCH, FIX_HACK, OPTIMISE)

STAGE_AFTER_STATUS: dict[str, str | None] = {
    COMPILE_ERROR: FIX_COMPILE,
    RUNTIME_ERROR: FIX_RUNTIME,
    TIMEOUT: FIX_RUNTIME,
    MISMATCH: FIX_MISMATCH,
    HACK_DETECTED: FIX_HACK,
    OK: OPTIMISE,
    UNVERIFIABLE: None,  # the platform cannot judge it: nothing useful to tell the model
}


def next_stage(status: str) -> str | None:
    """The stage that follows a verdict status (None: stop). `infra_error` is not the program's
    outcome and has no next stage: re-verify instead."""
    if status == INFRA_ERROR:
        raise BadInputError("infra_error has no next stage: the harness failed, not the program",
                            hint="verify the candidate again instead of asking the model to change it")
    if status not in STAGE_AFTER_STATUS:
        raise BadInputError(f"unknown verdict status {status!r}", hint=f"statuses: {', '.join(STAGE_AFTER_STATUS)}")
    return STAGE_AFTER_STATUS[status]


def check_stage(stage: str) -> str:
    if stage not in STAGES:
        raise BadInputError(f"unknown prompt stage {stage!r}", hint=f"stages: {', '.join(STAGES)}")
    return stage
