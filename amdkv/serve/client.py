"""`RemoteVerifier`: the verifier interface (`verify`, `submit`, `verify_many`, `platform`,
`config`) over an `amdkv serve` service, so `amdkv eval --verifier-url URL`, a reward function or
an agent loop uses a service exactly as it would a local verifier.

What travels (protocol version 1, docs/serve.md):
- a `Task` goes by `task_id` with its `source_hash`; when the server does not have that task, or
  has a different copy of it (404 / 409), the request is sent again with the task's text as
  `task_source` (and that task is sent so from then on). A task *path* is read and sent as
  `task_source`: the server then names it by its METADATA id, else `task_<sha12>`;
- the candidate (a `Candidate`, a path, or `source=`, read by `as_candidate` as every verifier
  reads it) as `candidate_source` and `language`;
- a fresh `request_id` (a UUID) per submission, the same one on every retry of it, so a retry
  after a dropped connection gets the first answer, never a second run;
- `deadline` (time.monotonic(), as for local verifiers) as `options.deadline_s`, what is left of it.

What comes back: the Verdict (`Verdict.from_dict`), whose echoed `candidate_sha256` must be the
hash of what was sent (else InfrastructureError: a swapped answer must never be taken). A 504
(the deadline passed) is the `infra_error` verdict in its body, as a local verifier would give.
Transport failures (refused or dropped connections, timeouts, 5xx) are retried with exponential
backoff; once the retries are spent the future raises `InfrastructureError`, never a verdict.
429 waits for Retry-After and tries again (bounded by `overload_wait_s`). 4xx refusals raise
`BadInputError` with the server's message and hint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from amdkv.config import VerifierConfig
from amdkv.errors import AmdkvError, BadInputError, InfrastructureError, TaskFormatError
from amdkv.serve.protocol import HEALTH_PATH, PROTOCOL, PROTOCOL_MAJOR, TOKEN_ENV, VERIFY_PATH
from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE, BaseVerifier, as_task
from amdkv.verify.candidate import Candidate, as_candidate
from amdkv.verify.platform import PlatformInfo
from amdkv.verify.verdict import Verdict, infra_error_verdict

RETRY_STATUSES = (500, 502, 503)
MAX_BACKOFF_S = 10.0


@dataclasses.dataclass(frozen=True)
class _TaskRef:
    task_id: str | None        # a Task's id (None for a task file's text)
    source_hash: str | None
    source: str | None         # the task file's text, sent when the server lacks the task
    label: str


@dataclasses.dataclass(frozen=True)
class _Prepared:
    task: _TaskRef
    candidate: Candidate
    request_id: str


class RemoteVerifier(BaseVerifier):
    """A verifier that is an `amdkv serve` service at `url`.

    `token`: the service's bearer token (default: $AMDKV_SERVE_TOKEN). `retries`: transport
    retries per submission (backoff `backoff_s` x 2^n, at most 10 s, with jitter). `timeout`:
    seconds to wait for one answer (default: the server's deadline + 60 s). `max_in_flight`:
    submissions sent at once (default: twice the server's jobs, at least 4, at most its queue).
    `overload_wait_s`: how long 429 answers are waited out before giving up.
    Opening one asks the service's `/v1/health`: `.platform` and `.config` are the server's, so
    reports name the platform that really judged."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None, retries: int = 4,
                 backoff_s: float = 0.5, max_in_flight: int | None = None, overload_wait_s: float = 600.0,
                 connect_timeout_s: float = 10.0) -> None:
        import httpx

        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise BadInputError(f"verifier URL {url!r} is not an http(s) URL", hint="e.g. http://127.0.0.1:8765")
        self.url = url
        self.retries = max(0, int(retries))
        self.backoff_s = backoff_s
        self.overload_wait_s = overload_wait_s
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url, headers=headers, timeout=httpx.Timeout(60.0, connect=connect_timeout_s),
                                  trust_env=False)
        self._needs_source: set[tuple[str, str | None]] = set()
        self._closed = False
        try:
            self.server = self._health()
            self.platform = PlatformInfo(**self.server["platform"])
            self.config = VerifierConfig.from_dict(self.server["config"])
        except (KeyError, TypeError, ValueError, AmdkvError) as exc:
            self._http.close()
            if isinstance(exc, AmdkvError):
                raise
            raise InfrastructureError(f"{url} did not describe itself as amdkv serve does ({type(exc).__name__}: {exc})",
                                      hint="is this URL an `amdkv serve` service of a compatible version?") from None
        self.device_description = self.server.get("device_description", self.platform.device)
        limits = self.server.get("limits", {})
        self.timeout = timeout if timeout is not None else float(limits.get("default_deadline_s", 600.0)) + 60.0
        queue = int(self.server.get("queue", {}).get("max", 64))
        in_flight = max_in_flight or min(queue, max(4, 2 * int(self.config.jobs)))
        self._http.close()
        self._http = httpx.Client(base_url=url, headers=headers, trust_env=False,
                                  timeout=httpx.Timeout(self.timeout, connect=connect_timeout_s),
                                  limits=httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight))
        self._pool = ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="amdkv-remote")
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ BaseVerifier
    def submit(self, task: Any, candidate: Any = None, *, source: str | None = None, language: str | None = None,
               deadline: float | None = None) -> "Future[Verdict]":
        return self._submit_prepared(self._prepare(task, candidate, source=source, language=language), deadline)

    def _prepare(self, task: Any, candidate: Any, *, source: str | None = None,
                 language: str | None = None) -> _Prepared:
        if self._closed:
            raise AmdkvError("this RemoteVerifier is closed", hint="open a new one (use it as a context manager)")
        return _Prepared(_task_ref(task), as_candidate(candidate, source=source, language=language), uuid.uuid4().hex)

    def _submit_prepared(self, prepared: _Prepared, deadline: float | None) -> "Future[Verdict]":
        return self._pool.submit(self._call, prepared, deadline)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        self._http.close()

    # ------------------------------------------------------------------ one submission
    def _body(self, p: _Prepared, deadline: float | None) -> dict[str, Any]:
        ref = p.task
        body: dict[str, Any] = {"request_id": p.request_id, "candidate_source": p.candidate.source,
                                "language": p.candidate.language}
        if ref.task_id is not None:
            body["task_id"] = ref.task_id
        if ref.task_id is None or (ref.task_id, ref.source_hash) in self._needs_source:
            body["task_source"] = ref.source
        elif ref.source_hash:
            body["task_source_hash"] = ref.source_hash
        if deadline is not None:
            body["options"] = {"deadline_s": max(0.001, deadline - time.monotonic())}
        return body

    def _call(self, p: _Prepared, deadline: float | None) -> Verdict:
        import httpx

        failures, overloaded_s = 0, 0.0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                return self._infra(p, "not sent before the caller's deadline (the service was busy or unreachable)",
                                   NOT_STARTED_BEFORE_DEADLINE)
            body = self._body(p, deadline)
            timeout = self.timeout if deadline is None else max(1.0, deadline - time.monotonic()) + 30.0
            try:
                r = self._http.post(VERIFY_PATH, content=json.dumps(body), timeout=timeout,
                                    headers={"Content-Type": "application/json"})
            except httpx.TransportError as exc:
                failures = self._after_failure(failures, f"{type(exc).__name__}: {exc}")
                continue
            if r.status_code in (200, 504):
                return self._verdict(r, p)
            error = _error_of(r)
            if r.status_code == 429:
                wait = _retry_after(r)
                overloaded_s += wait
                if overloaded_s > self.overload_wait_s:
                    raise InfrastructureError(f"{self.url} stayed overloaded (429 queue_full) for {overloaded_s:.0f} s",
                                              hint="add services, lower the submission rate, or raise overload_wait_s")
                time.sleep(wait)
                continue
            if r.status_code in (404, 409) and error.get("code") in ("unknown_task", "task_source_mismatch") \
                    and "task_source" not in body and p.task.source is not None:
                with self._lock:
                    self._needs_source.add((p.task.task_id, p.task.source_hash))
                continue
            if r.status_code in RETRY_STATUSES:
                failures = self._after_failure(failures, f"HTTP {r.status_code}: {error.get('message')}")
                continue
            raise BadInputError(f"{self.url} refused {p.candidate.label} on {p.task.label} (HTTP {r.status_code} "
                                f"{error.get('code')}): {error.get('message')}", hint=error.get("hint"))

    def _after_failure(self, failures: int, what: str) -> int:
        """Count a transport failure; sleep the backoff, or raise once the retries are spent."""
        failures += 1
        if failures > self.retries:
            raise InfrastructureError(f"the verification service at {self.url} failed {failures} time(s) in a row; "
                                      f"last: {what}",
                                      hint="is `amdkv serve` running and reachable? no verdict was made up for this "
                                           "submission; retry it when the service is back")
        time.sleep(min(MAX_BACKOFF_S, self.backoff_s * 2 ** (failures - 1)) * (0.5 + random.random()))
        return failures

    def _verdict(self, r: Any, p: _Prepared) -> Verdict:
        try:
            body = json.loads(r.text)
            if not str(body.get("protocol", "")).startswith("amdkv-serve/"):
                raise ValueError(f"protocol {body.get('protocol')!r}")
            verdict = Verdict.from_dict(body["verdict"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InfrastructureError(f"{self.url} sent an unreadable answer (HTTP {r.status_code}): {exc}",
                                      hint=f"client speaks {PROTOCOL}; is the server the same amdkv version?") from None
        if verdict.candidate_sha256 != p.candidate.sha256:
            raise InfrastructureError(
                f"{self.url} answered for candidate {verdict.candidate_sha256} but {p.candidate.sha256} was sent",
                hint="the service or a proxy mixed up answers; this verdict was not taken")
        if p.task.task_id is not None and verdict.task_id not in (None, p.task.task_id):
            raise InfrastructureError(f"{self.url} answered for task {verdict.task_id}, not {p.task.task_id}",
                                      hint="the service or a proxy mixed up answers; this verdict was not taken")
        return verdict

    def _infra(self, p: _Prepared, message: str, reason: str) -> Verdict:
        return infra_error_verdict(reason, message, task_id=p.task.task_id, platform=self.platform.name,
                                   device=self.device_description, candidate_sha256=p.candidate.sha256)

    def _health(self) -> dict[str, Any]:
        import httpx

        failures = 0
        while True:
            try:
                r = self._http.get(HEALTH_PATH)
            except httpx.TransportError as exc:
                failures = self._after_failure(failures, f"{type(exc).__name__}: {exc}")
                continue
            if r.status_code in RETRY_STATUSES:
                failures = self._after_failure(failures, f"HTTP {r.status_code}")
                continue
            break
        if r.status_code == 401:
            raise BadInputError(f"{self.url} refused the token: {_error_of(r).get('message')}",
                                hint=f"pass the server's token (--verifier-token, token=..., or {TOKEN_ENV})")
        if r.status_code != 200:
            raise InfrastructureError(f"{self.url}{HEALTH_PATH} answered HTTP {r.status_code}: {r.text[:300]}",
                                      hint="is this URL an `amdkv serve` service?")
        body = r.json()
        if body.get("protocol") != PROTOCOL:
            raise InfrastructureError(f"{self.url} speaks {body.get('protocol')!r}, this client {PROTOCOL}",
                                      hint=f"use a client of the server's amdkv version (protocol major {PROTOCOL_MAJOR})")
        return body


def _task_ref(task: Any) -> _TaskRef:
    """A task argument as it travels: a Task by id (+ hash, + text for the fallback), a path as text."""
    from amdkv.tasks.types import Task

    if isinstance(task, Task):
        return _TaskRef(task.id, task.source_hash, task.source, task.id)
    if isinstance(task, (str, os.PathLike)):
        path = Path(task)
        try:
            return _TaskRef(None, None, path.read_text(), str(path))
        except (OSError, UnicodeDecodeError) as exc:
            raise TaskFormatError(f"cannot read task file {path}: {exc}",
                                  hint="pass the path of a .py task file, or a loaded Task") from None
    return as_task(task)  # raises the error every verifier gives for anything else


def _error_of(r: Any) -> dict[str, Any]:
    try:
        error = r.json().get("error")
    except (ValueError, AttributeError):
        error = None
    return error if isinstance(error, dict) else {"message": r.text[:500]}


def _retry_after(r: Any) -> float:
    try:
        return min(30.0, max(0.05, float(r.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0
