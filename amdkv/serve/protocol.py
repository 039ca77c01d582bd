"""The `amdkv serve` protocol, version 1: the names both sides use (docs/serve.md is the spec).

Shared by the server (app.py, service.py) and the client (client.py); standard library only, so
the client and `amdkv --help` never import FastAPI.

Versioning: the major version is in the paths (`/v1/...`) and in every body (`"protocol":
"amdkv-serve/1"`). Within a major version fields are only added, never renamed or re-typed;
requests with fields the server does not know are refused (422), so a newer client never has a
field silently ignored by an older server. The verdict inside a response carries its own
`schema_version` (amdkv.verify.verdict.VERDICT_SCHEMA_VERSION).
"""

from __future__ import annotations

import ipaddress
import json
import math
from typing import Any

PROTOCOL_MAJOR = 1
PROTOCOL = f"amdkv-serve/{PROTOCOL_MAJOR}"

VERIFY_PATH = "/v1/verify"
VERIFY_BATCH_PATH = "/v1/verify_batch"
HEALTH_PATH = "/v1/health"
TASKS_PATH = "/v1/tasks"
# AMDKernelVault's execution protocol (rl/rl4kernel_triton/EXECUTION_PROTOCOL.md), version 1
AKV_EVALUATE_PATH = "/evaluate"
AKV_HEALTH_PATH = "/health"
AKV_PROTOCOL_VERSION = 1

TOKEN_ENV = "AMDKV_SERVE_TOKEN"       # the server's token and the client's default
DEFAULT_PORT = 8765
DEFAULT_MAX_QUEUE = 512
DEFAULT_MAX_BODY_BYTES = 4 << 20
DEFAULT_DEADLINE_S = 600.0
DEFAULT_MAX_DEADLINE_S = 3600.0
DEFAULT_REQUEST_TTL_S = 900.0
DEFAULT_REMEMBERED_REQUESTS = 4096

# Error codes (the `error.code` of every non-2xx body). `type` groups them coarsely, with the
# names AMDKernelVault's protocol uses for the two it has.
INVALID = "invalid_request"
INFRA = "infrastructure_error"
ERROR_TYPES = {
    "malformed_json": INVALID, "invalid_request": INVALID, "request_too_large": INVALID,
    "unauthorized": "unauthorized", "unknown_task": INVALID, "task_source_mismatch": INVALID,
    "bad_task_source": INVALID, "task_source_disabled": INVALID, "request_id_reused": INVALID,
    "not_found": INVALID, "method_not_allowed": INVALID, "batch_too_large": INVALID,
    "queue_full": "overloaded", "unverifiable": "unverifiable",
    "deadline_exceeded": INFRA, "verifier_unavailable": INFRA, "internal_error": INFRA,
}


def error_object(code: str, message: str, hint: str | None = None, **extra: Any) -> dict[str, Any]:
    """The `error` member of every error body: {code, type, message, hint, ...}."""
    return {"code": code, "type": ERROR_TYPES.get(code, INFRA), "message": message, "hint": hint, **extra}


def is_loopback(host: str) -> bool:
    """True when `host` accepts connections from this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def dumps(body: Any) -> bytes:
    """Response bytes. Verdicts can hold non-finite floats (an error of `inf`): they are written as
    the tokens NaN/Infinity, which Python's json (and so the client) reads back as floats."""
    return json.dumps(body, allow_nan=True, separators=(",", ":"), default=str).encode()


def finite_or_none(value: Any) -> Any:
    """Numbers for consumers that take strict JSON (the AMDKernelVault endpoint)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


class ServiceError(Exception):
    """An answer other than a verdict: HTTP `status` with the error body `error_object(code, ...)`.
    Raised by the service, turned into a response by the app."""

    def __init__(self, status: int, code: str, message: str, hint: str | None = None, *,
                 headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.hint = status, code, message, hint
        self.headers = headers or {}
        self.extra = extra

    def error(self) -> dict[str, Any]:
        return error_object(self.code, self.message, self.hint, **self.extra)
