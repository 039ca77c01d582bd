"""The HTTP face of `amdkv serve`: a FastAPI app over a VerificationService (protocol version 1,
docs/serve.md).

Routes: POST /v1/verify, POST /v1/verify_batch, GET /v1/health, GET /v1/tasks, and
AMDKernelVault's POST /evaluate and GET /health. Every non-2xx body is JSON with one shape,
`{"protocol": "amdkv-serve/1", "error": {"code", "type", "message", "hint"}}` (the AMDKernelVault
routes put `"protocol_version": 1` in place of `"protocol"`, as their client expects).

Decisions:
- Malformed JSON, or a body that is not a JSON object, is 400 `malformed_json`; a missing,
  wrong-typed or unknown field is 422 `invalid_request` naming each one.
- The body-size limit is a small ASGI middleware of ours rather than FastAPI's `max_body_size`,
  whose 413 is a plain-text "Content Too Large" sent from inside Starlette: ours answers with
  the JSON error shape and says what the limit is. It refuses on Content-Length before reading,
  and stops reading a body sent without one as soon as it passes the limit.
- Auth: `Authorization: Bearer <token>` compared in constant time (hmac.compare_digest); without
  a token configured the server only starts on loopback (ServeSettings.check).
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from amdkv.serve import kernelvault
from amdkv.serve.models import EvaluateRequest, VerifyBatchRequest, VerifyRequest
from amdkv.serve.protocol import (AKV_EVALUATE_PATH, AKV_HEALTH_PATH, AKV_PROTOCOL_VERSION, HEALTH_PATH, PROTOCOL,
                                  TASKS_PATH, TOKEN_ENV, VERIFY_BATCH_PATH, VERIFY_PATH, ServiceError, dumps,
                                  error_object)
from amdkv.serve.service import Outcome, VerificationService

log = logging.getLogger("amdkv.serve")
AKV_PATHS = (AKV_EVALUATE_PATH, AKV_HEALTH_PATH)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status_code=status, headers=headers, media_type="application/json")


def error_response(path: str, status: int, error: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    envelope = {"protocol_version": AKV_PROTOCOL_VERSION} if path in AKV_PATHS else {"protocol": PROTOCOL}
    return json_response(status, {**envelope, "error": error}, headers)


def outcome_response(outcome: Outcome) -> Response:
    return json_response(outcome.status, outcome.body, outcome.headers)


class BodyLimit:
    """Refuse request bodies over `max_bytes` with a JSON 413 (see the module docstring)."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_large(self, scope: dict[str, Any]) -> Response:
        mib = self.max_bytes / (1 << 20)
        return error_response(scope.get("path", ""), 413, error_object(
            "request_too_large", f"the request body is larger than this server's limit of {self.max_bytes} bytes "
            f"({mib:.1f} MiB)", hint="send smaller sources, or start the server with a larger --max-body-mib"))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await self._too_large(scope)(scope, receive, send)
        # Read the body here (at most max_bytes are held), then hand it on in one message: the
        # app's own body reading turns any exception into a 400, so the limit cannot be raised
        # from inside it.
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                return await self._too_large(scope)(scope, receive, send)
            if not message.get("more_body", False):
                break
        body, delivered = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def create_app(service: VerificationService) -> FastAPI:
    """The FastAPI app of one service (the CLI runs it under uvicorn; tests too, on loopback)."""
    settings = service.settings
    app = FastAPI(title="amdkv serve", version=PROTOCOL,
                  description="Execution-verified GPU kernels: verify candidates against tasks (docs/serve.md).")
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    bearer = HTTPBearer(auto_error=False, description=f"the server's token ({TOKEN_ENV})")

    async def authorized(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if settings.token is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(given.encode(), settings.token.encode()):
            raise ServiceError(401, "unauthorized", "missing or wrong bearer token" if given else
                               "this server needs a bearer token (Authorization: Bearer <token>)",
                               hint=f"pass the server's token (RemoteVerifier(url, token=...), "
                                    f"--verifier-token, or {TOKEN_ENV})",
                               headers={"WWW-Authenticate": "Bearer"})

    guarded = [Depends(authorized)]
    evaluate_guard = [] if settings.evaluate_open else guarded

    @app.post(VERIFY_PATH, dependencies=guarded)
    async def verify(req: VerifyRequest) -> Response:
        """Verify one candidate; the body is the Verdict (docs/serve.md)."""
        [outcome] = await service.answer([req], batch=False)
        return outcome_response(outcome)

    @app.post(VERIFY_BATCH_PATH, dependencies=guarded)
    async def verify_batch(req: VerifyBatchRequest) -> Response:
        """Verify several candidates, admitted whole or refused whole; answers in input order."""
        outcomes = await service.answer(req.items, batch=True)
        return json_response(200, {"protocol": PROTOCOL,
                                   "results": [{"status_code": o.status, **o.body} for o in outcomes]})

    @app.get(HEALTH_PATH, dependencies=guarded)
    async def health() -> Response:
        return json_response(200, service.health())

    @app.get(TASKS_PATH, dependencies=guarded)
    async def tasks() -> Response:
        return json_response(200, service.task_list())

    @app.post(AKV_EVALUATE_PATH, dependencies=evaluate_guard)
    async def evaluate(req: EvaluateRequest) -> Response:
        """AMDKernelVault's execution protocol, version 1 (kernelvault.py)."""
        task = service.task_for_filename(req.filename)
        internal = VerifyRequest(task_id=task.id, candidate_source=req.code)
        [outcome] = await service.answer([internal], batch=False)
        return outcome_response(kernelvault.evaluate_outcome(outcome, atol=req.atol, rtol=req.rtol))

    @app.get(AKV_HEALTH_PATH, dependencies=evaluate_guard)
    async def akv_health() -> Response:
        return json_response(200, {"protocol_version": AKV_PROTOCOL_VERSION, "status": "ready",
                                   "gpu": [d["index"] for d in service.devices()]})

    @app.exception_handler(ServiceError)
    async def service_error(request: Request, exc: ServiceError) -> Response:
        return error_response(request.url.path, exc.status, exc.error(), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        status, error = validation_error(exc.errors())
        return error_response(request.url.path, status, error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
        return error_response(request.url.path, exc.status_code, error_object(
            code, f"{request.method} {request.url.path}: {exc.detail}",
            hint=f"the routes are {VERIFY_PATH}, {VERIFY_BATCH_PATH}, {HEALTH_PATH}, {TASKS_PATH}, "
                 f"{AKV_EVALUATE_PATH} (docs/serve.md; /docs shows the schema)"), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error answering %s %s", request.method, request.url.path)
        return error_response(request.url.path, 500, error_object(
            "internal_error", f"the service failed: {type(exc).__name__}: {exc}",
            hint="a bug in amdkv serve (its log has the traceback); retry, and report it if it repeats"))

    return app


def validation_error(errors: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """400 for a body that is not a JSON object, else 422 naming every bad field."""
    for e in errors:
        if e.get("type") == "json_invalid":
            where = e.get("loc", [None, None])[-1]
            return 400, error_object("malformed_json", f"the body is not valid JSON: {(e.get('ctx') or {}).get('error')}"
                                     f" (at character {where})", hint="send a JSON object with Content-Type: application/json")
        if tuple(e.get("loc", ())) == ("body",) and e.get("type") in ("model_attributes_type", "dict_type", "model_type",
                                                                      "missing"):
            return 400, error_object("malformed_json", "the body must be a JSON object"
                                     + (" (it is empty)" if e.get("type") == "missing" else ""),
                                     hint="send a JSON object with Content-Type: application/json")
    fields = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ())[1:]) or "body"
        fields.append({"field": loc, "problem": e.get("msg"), "type": e.get("type")})
    message = "; ".join(f"{f['field']}: {f['problem']}" for f in fields)
    return 422, error_object("invalid_request", f"the request does not follow the protocol: {message}",
                             hint="docs/serve.md (or GET /openapi.json) describes every field", fields=fields)
