"""Request bodies of the `amdkv serve` protocol (version 1) as pydantic models: FastAPI validates
every request against them (a missing or wrong-typed field is a 422 naming it) and publishes
them in the service's OpenAPI schema (`GET /openapi.json`, `/docs`).

Strict: no type coercion ("3" is not a number) and no unknown fields (a field this server does
not know is an error, not silently ignored). Server side only (pydantic comes with FastAPI).
"""

from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from amdkv.serve.protocol import AKV_PROTOCOL_VERSION

REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class VerifyOptions(_Strict):
    deadline_s: Optional[float] = Field(
        None, gt=0, description="seconds from arrival; not finished by then: 504 with an infra_error verdict "
                                "(default: the server's --deadline-s)")


class VerifyRequest(_Strict):
    """One candidate against one task: the task by `task_id` (a task of the served suite) or by
    `task_source` (the text of a task file, loaded in a sandboxed process), or both (then the
    source is loaded and given that id)."""

    request_id: Optional[str] = Field(
        None, pattern=REQUEST_ID_PATTERN,
        description="client-chosen id (a UUID); a retry with the same id gets the first answer, never a second run")
    task_id: Optional[str] = Field(None, min_length=1, max_length=256)
    task_source: Optional[str] = Field(None, min_length=1)
    task_source_hash: Optional[str] = Field(
        None, min_length=1, max_length=64,
        description="the client's Task.source_hash: with task_id, the server checks its copy matches (else 409)")
    candidate_source: str = Field(..., min_length=1, description="the candidate program (defines ModelNew)")
    language: Literal["auto", "triton", "hip"] = "auto"
    options: VerifyOptions = Field(default_factory=VerifyOptions)

    @model_validator(mode="after")
    def _task_named(self) -> "VerifyRequest":
        if self.task_id is None and self.task_source is None:
            raise ValueError("give task_id (a task of the served suite, see GET /v1/tasks) or task_source")
        return self


class VerifyBatchRequest(_Strict):
    items: list[VerifyRequest] = Field(..., min_length=1)

    @field_validator("items")
    @classmethod
    def _distinct_ids(cls, items: list[VerifyRequest]) -> list[VerifyRequest]:
        ids = [i.request_id for i in items if i.request_id is not None]
        if len(ids) != len(set(ids)):
            raise ValueError("request_id values must be distinct within a batch")
        return items


class EvaluateRequest(_Strict):
    """AMDKernelVault's `POST /evaluate` request (its protocol version 1)."""

    protocol_version: Literal[AKV_PROTOCOL_VERSION]  # type: ignore[valid-type]
    code: str = Field(..., min_length=1)
    filename: str = Field(..., min_length=1, description="<task_id>.py or <suite>/<task_id>.py")
    atol: float = Field(..., ge=0)
    rtol: float = Field(..., ge=0)

    @field_validator("atol", "rtol")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite, nonnegative number")
        return value

    @field_validator("code")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the candidate source must be a nonempty string")
        return value
