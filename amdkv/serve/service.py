"""The verification service behind the HTTP app: one verifier for the node, admission, request ids,
deadlines and task resolution. No FastAPI here (app.py maps HTTP onto this), so every rule below
is plain asyncio code.

- One verifier (`open_verifier(config)`: a Verifier or a MultiGpuScheduler over the node's GPUs)
  serves every request; its futures are awaited with `asyncio.wrap_future`, so the event loop
  never blocks on verification.
- Admission: at most `max_queue` submissions are admitted and not finished (queued in the
  verifier or running). A slot is freed when the verifier's run ends, not when the HTTP answer is
  sent: a run whose deadline passed keeps its slot until it really finishes. A batch is admitted
  whole or refused whole (429 with Retry-After), so a client never has to work out which half of
  its batch ran.
- Deadlines: `options.deadline_s` (default `default_deadline_s`) counts from arrival. Not started
  by then: the verifier answers `infra_error` / `not_started_before_deadline`; still running then:
  `infra_error` / `deadline_exceeded`. Both are HTTP 504 with that infra_error verdict in the
  body, never a judgement of the candidate. The run itself goes on and its verdict lands in the
  verdict cache (when the cache is on), where the next identical request finds it.
- Request ids (idempotency.py): a retry with the same id gets the first answer without a second
  run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import difflib
import functools
import hashlib
import json
import math
import statistics
import time
from pathlib import PurePosixPath
from typing import Any

from amdkv.errors import AmdkvError, BadInputError
from amdkv.serve.idempotency import RecentRequests
from amdkv.serve.protocol import (DEFAULT_DEADLINE_S, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_DEADLINE_S,
                                  DEFAULT_MAX_QUEUE, DEFAULT_PORT, DEFAULT_REMEMBERED_REQUESTS,
                                  DEFAULT_REQUEST_TTL_S, PROTOCOL, TASKS_PATH, TOKEN_ENV, ServiceError,
                                  error_object, is_loopback)
from amdkv.tasks.types import Task, task_source_hash
from amdkv.verify.api import DEADLINE_EXCEEDED, DEADLINE_REASONS
from amdkv.verify.candidate import Candidate, source_sha256
from amdkv.verify.verdict import INFRA_ERROR, VERDICT_SCHEMA_VERSION, Verdict


@dataclasses.dataclass(frozen=True)
class ServeSettings:
    """How `amdkv serve` runs (its CLI options). The token never appears in repr or logs."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = dataclasses.field(default=None, repr=False)
    max_queue: int = DEFAULT_MAX_QUEUE
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    default_deadline_s: float = DEFAULT_DEADLINE_S
    max_deadline_s: float = DEFAULT_MAX_DEADLINE_S
    allow_task_source: bool = True
    evaluate_open: bool = False
    request_ttl_s: float = DEFAULT_REQUEST_TTL_S
    remembered_requests: int = DEFAULT_REMEMBERED_REQUESTS
    task_load_timeout_s: float = 60.0

    def check(self) -> "ServeSettings":
        """Refuse settings the service must not start with (before anything is opened)."""
        if not self.token and not is_loopback(self.host):
            raise BadInputError(
                f"--host {self.host} accepts connections from other machines, and no token is set",
                hint=f"set a bearer token (export {TOKEN_ENV}=...; or --token), or listen on 127.0.0.1 only")
        if self.token is not None and not self.token.strip():
            raise BadInputError("the token is empty", hint=f"set {TOKEN_ENV} to a long random string")
        for name in ("max_queue", "max_body_bytes", "default_deadline_s", "max_deadline_s", "request_ttl_s",
                     "remembered_requests", "task_load_timeout_s"):
            if not getattr(self, name) > 0:
                raise BadInputError(f"{name}={getattr(self, name)!r} must be > 0", hint="use a positive value")
        if self.default_deadline_s > self.max_deadline_s:
            raise BadInputError(f"the default deadline ({self.default_deadline_s:g} s) is above the maximum "
                                f"({self.max_deadline_s:g} s)", hint="raise --max-deadline-s or lower --deadline-s")
        return self

    @property
    def auth(self) -> str:
        return "bearer" if self.token else "none"


@dataclasses.dataclass
class Outcome:
    """One submission's HTTP answer: its status code and body."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    def replayed(self) -> "Outcome":
        return dataclasses.replace(self, body={**self.body, "replayed": True})


@dataclasses.dataclass(frozen=True)
class _Job:
    index: int
    request_id: str | None
    fingerprint: str
    task: Task
    candidate: Candidate
    deadline_at: float      # time.monotonic()
    deadline_s: float


def request_fingerprint(req: Any) -> str:
    """What a retry must repeat exactly (the deadline is left out: a retry sends what is left of it)."""
    blob = {"task_id": req.task_id, "task_source": req.task_source and source_sha256(req.task_source),
            "task_source_hash": req.task_source_hash, "candidate": source_sha256(req.candidate_source),
            "language": req.language}
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()


class VerificationService:
    """Everything `amdkv serve` does per request, on one verifier. Its async methods run on the
    server's event loop; `close()` closes the verifier."""

    def __init__(self, verifier: Any, tasks: list[Task], settings: ServeSettings, *, suite_spec: str) -> None:
        from amdkv.tasks.isolated import IsolatedTaskCache, load_task_isolated
        from amdkv.tasks.suites import suite_version

        self.verifier = verifier
        self.settings = settings.check()
        self.suite_spec = suite_spec
        self.tasks = {t.id: t for t in tasks}
        self.suite_version = suite_version(tasks)
        config = verifier.config
        self._isolated = IsolatedTaskCache(functools.partial(
            load_task_isolated, cache_dir=config.cache_path, timeout=settings.task_load_timeout_s,
            start=config.spare_start, mem_cap_bytes=int(config.mem_cap_gib * (1 << 30)), sandbox=config.sandbox,
            extra_env={"TRITON_INTERPRET": "1"} if verifier.platform.interpreter else {}))
        self._recent = RecentRequests(settings.request_ttl_s, settings.remembered_requests)
        self._admitted = 0
        self._run_seconds: collections.deque[float] = collections.deque(maxlen=64)
        self.counters: collections.Counter[str] = collections.Counter()
        self.started_at = time.time()
        _ = verifier.identity  # imports torch/triton and reads git once, now, not in the first request
        self.versions = _versions()

    # ------------------------------------------------------------------------------- answering
    async def answer(self, requests: list[Any], *, batch: bool) -> list[Outcome]:
        """Answers for verify requests, in order: each a verdict (200), a deadline's infra_error
        (504) or a replay of an earlier answer. Refusals of the whole request raise ServiceError."""
        arrived = time.monotonic()
        self.counters["requests"] += len(requests)
        fingerprints = [request_fingerprint(r) for r in requests]
        answers: list[asyncio.Future[Outcome] | None] = [
            self._earlier(r, fp, i, batch) for i, (r, fp) in enumerate(zip(requests, fingerprints))]
        jobs = await asyncio.gather(*(self._resolve(requests[i], fingerprints[i], i, batch, arrived)
                                      for i, a in enumerate(answers) if a is None))
        # another request with one of these ids may have started while the tasks were resolved
        for job in jobs:
            answers[job.index] = self._earlier(requests[job.index], job.fingerprint, job.index, batch)
        jobs = [j for j in jobs if answers[j.index] is None]
        self._admit(len(jobs))
        started = set()
        loop = asyncio.get_running_loop()
        for job in jobs:
            answer = loop.create_task(self._execute(job))  # not tied to this handler: a dropped
            if job.request_id is not None:                 # connection does not lose the answer
                self._recent.put(job.request_id, job.fingerprint, answer)
            answers[job.index] = answer
            started.add(job.index)
        outcomes = []
        for i, answer in enumerate(answers):
            outcome = await asyncio.shield(answer)
            if i not in started:
                self.counters["replayed"] += 1
                outcome = outcome.replayed()
            outcomes.append(outcome)
        return outcomes

    def _earlier(self, req: Any, fingerprint: str, index: int, batch: bool) -> "asyncio.Future[Outcome] | None":
        if req.request_id is None:
            return None
        try:
            return self._recent.get(req.request_id, fingerprint)
        except ServiceError as exc:
            raise _for_item(exc, index, batch) from None

    async def _resolve(self, req: Any, fingerprint: str, index: int, batch: bool, arrived: float) -> _Job:
        try:
            deadline_s = req.options.deadline_s or self.settings.default_deadline_s
            if deadline_s > self.settings.max_deadline_s:
                raise ServiceError(422, "invalid_request", f"options.deadline_s={deadline_s:g} is above this "
                                   f"server's limit of {self.settings.max_deadline_s:g} s",
                                   hint="ask for less, or start the server with a larger --max-deadline-s")
            task = await self._task(req.task_id, req.task_source, req.task_source_hash)
            candidate = Candidate(source=req.candidate_source, language=req.language)
        except ServiceError as exc:
            raise _for_item(exc, index, batch) from None
        return _Job(index, req.request_id, fingerprint, task, candidate, arrived + deadline_s, deadline_s)

    async def _task(self, task_id: str | None, source: str | None, source_hash: str | None) -> Task:
        if source is not None:
            return await self._task_from_source(source, task_id, source_hash)
        task = self.tasks.get(task_id)
        if task is None:
            near = difflib.get_close_matches(task_id, list(self.tasks), n=3)
            raise ServiceError(404, "unknown_task", f"task {task_id!r} is not in the served suite {self.suite_spec} "
                               f"({len(self.tasks)} tasks)" + (f"; did you mean {', '.join(near)}?" if near else ""),
                               hint=f"GET {TASKS_PATH} lists the served tasks; or send the task file's text as task_source")
        if source_hash is not None and source_hash != task.source_hash:
            raise ServiceError(409, "task_source_mismatch",
                               f"this server's task {task_id!r} has source hash {task.source_hash}, the request "
                               f"names {source_hash}: the two copies differ",
                               hint="send the task file's text as task_source (RemoteVerifier does so by itself)")
        return task

    async def _task_from_source(self, source: str, task_id: str | None, source_hash: str | None) -> Task:
        if not self.settings.allow_task_source:
            raise ServiceError(403, "task_source_disabled", "this server does not load tasks sent as task_source",
                               hint=f"name a served task by task_id (GET {TASKS_PATH}), or ask the operator to "
                                    "start the server without --no-task-source")
        if source_hash is not None and source_hash != task_source_hash(source):
            raise ServiceError(422, "invalid_request", "task_source_hash is not the hash of task_source",
                               hint="send Task.source_hash of the task whose source you send, or leave it out")
        try:
            return await asyncio.to_thread(self._isolated.get, source, task_id)
        except BadInputError as exc:
            raise ServiceError(422, "bad_task_source", exc.message, hint=exc.hint) from None
        except AmdkvError as exc:  # the sandbox itself failed (fork server, disk): not the client's fault
            raise ServiceError(503, "verifier_unavailable", f"could not load the task source: {exc.message}",
                               hint=exc.hint) from None

    def _admit(self, n: int) -> None:
        if n == 0:
            return
        limit = self.settings.max_queue
        if n > limit:
            raise ServiceError(413, "batch_too_large", f"a batch of {n} new submissions is larger than this "
                               f"server's queue ({limit})", hint=f"send at most {limit} items per batch")
        free = limit - self._admitted
        if n > free:
            self.counters["queue_full"] += 1
            wait = self.retry_after(n - free)
            raise ServiceError(429, "queue_full", f"the queue is full ({self._admitted} of {limit} admitted and "
                               f"not finished; this request needs {n})",
                               hint=f"retry after {wait} s (Retry-After); a batch is admitted whole or not at all",
                               headers={"Retry-After": str(wait)})
        self._admitted += n
        self.counters["admitted"] += n

    def retry_after(self, slots_needed: int) -> int:
        """Seconds until about `slots_needed` slots are free: recent run time x slots / jobs, 1-60."""
        per_run = statistics.median(self._run_seconds) if self._run_seconds else 1.0
        jobs = max(1, int(getattr(self.verifier.config, "jobs", 1)))
        return int(min(60, max(1, math.ceil(per_run * slots_needed / jobs))))

    def _finished(self, started: float) -> None:
        self._admitted -= 1
        self._run_seconds.append(time.monotonic() - started)

    async def _execute(self, job: _Job) -> Outcome:
        """Run one admitted job to its answer; never raises (a failure here is the service's)."""
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        try:
            future = self.verifier.submit(job.task, job.candidate, deadline=job.deadline_at)
        except Exception as exc:  # noqa: BLE001 - a closed or broken verifier: the service's failure
            self._admitted -= 1
            verdict = self.verifier.infra_verdict(job.task, job.candidate, exc, reason="verifier_unavailable")
            return self._verdict_outcome(job, verdict, 503, "verifier_unavailable", str(exc))

        def release(_: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the server is shutting down
                loop.call_soon_threadsafe(self._finished, started)

        future.add_done_callback(release)
        try:
            verdict = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)),
                                             timeout=max(0.0, job.deadline_at - time.monotonic()))
        except asyncio.TimeoutError:
            verdict = self.verifier.infra_verdict(
                job.task, job.candidate, f"still running when its deadline of {job.deadline_s:g} s passed; the run "
                "goes on and its verdict lands in the verdict cache (when on)", reason=DEADLINE_EXCEEDED)
        except Exception as exc:  # noqa: BLE001 - the verifier's future failed instead of giving a verdict
            verdict = self.verifier.infra_verdict(job.task, job.candidate, exc)
        if verdict.reason in DEADLINE_REASONS and verdict.status == INFRA_ERROR:
            self.counters["deadline_exceeded"] += 1
            return self._verdict_outcome(job, verdict, 504, "deadline_exceeded",
                                         f"the request's deadline of {job.deadline_s:g} s passed "
                                         f"({verdict.reason}): infra_error, not a judgement of the candidate")
        self.counters["verdicts"] += 1
        self.counters["cache_hits"] += bool(verdict.cache_hit)
        return self._verdict_outcome(job, verdict, 200)

    def _verdict_outcome(self, job: _Job, verdict: Verdict, status: int, code: str | None = None,
                         message: str | None = None) -> Outcome:
        body: dict[str, Any] = {"protocol": PROTOCOL, "request_id": job.request_id, "replayed": False,
                                "verdict": verdict.to_dict()}
        if code is not None:
            hint = ("retry with more time (options.deadline_s) or when the queue is shorter" if status == 504
                    else "the service is shutting down or broken; retry on another service")
            body["error"] = error_object(code, message or code, hint)
        return Outcome(status, body)

    # ------------------------------------------------------------------------------- AMDKernelVault
    def task_for_filename(self, filename: str) -> Task:
        """The served task that AMDKernelVault's `filename` names: `<task_id>.py`, or
        `<suite>/<task_id>.py` (then the task's suite must match)."""
        bad = ("\\" in filename or "\x00" in filename or filename.startswith("/")
               or any(part in ("", ".", "..") for part in filename.split("/")) or not filename.endswith(".py"))
        if bad:
            raise ServiceError(400, "invalid_request", f"filename {filename!r} is not a relative POSIX path ending in .py",
                               hint="name a served task as <task_id>.py or <suite>/<task_id>.py")
        path = PurePosixPath(filename)
        task = self.tasks.get(path.stem)
        if task is None or (len(path.parts) > 1 and path.parent.name != task.suite):
            raise ServiceError(404, "unknown_task", f"{filename!r} names no task of the served suite {self.suite_spec}",
                               hint=f"GET {TASKS_PATH} lists the served tasks; use <task_id>.py")
        return task

    # ------------------------------------------------------------------------------- listings
    def health(self) -> dict[str, Any]:
        v = self.verifier
        queue = {"admitted": self._admitted, "max": self.settings.max_queue}
        if hasattr(v, "queue_depth"):
            queue["in_verifier"] = v.queue_depth()
        return {
            "protocol": PROTOCOL, "status": "ok",
            "platform": dataclasses.asdict(v.platform), "device_description": v.device_description,
            "is_amd": v.platform.name == "rocm", "devices": self.devices(),
            "config": v.config.to_dict(),
            "suite": {"spec": self.suite_spec, "version": self.suite_version, "tasks": len(self.tasks)},
            "queue": queue,
            "limits": {"max_body_bytes": self.settings.max_body_bytes, "max_batch": self.settings.max_queue,
                       "default_deadline_s": self.settings.default_deadline_s,
                       "max_deadline_s": self.settings.max_deadline_s},
            "auth": self.settings.auth, "task_source": self.settings.allow_task_source,
            "evaluate_open": self.settings.evaluate_open,
            "versions": self.versions, "counters": dict(self.counters),
            "remembered_requests": len(self._recent), "isolated_task_loads": self._isolated.loads,
            "uptime_s": round(time.time() - self.started_at, 1),
        }

    def devices(self) -> list[dict[str, Any]]:
        v = self.verifier
        if hasattr(v, "gpus"):  # MultiGpuScheduler
            bad = set(v.quarantined())
            return [{"index": i, "name": v.device_description, "quarantined": i in bad} for i in v.gpus]
        return [{"index": v.platform.device, "name": v.device_description, "quarantined": False}]

    def task_list(self) -> dict[str, Any]:
        rows = []
        for t in self.tasks.values():
            row = t.summary()
            row.pop("path", None)  # the server's file system is none of the client's business
            rows.append(row)
        return {"protocol": PROTOCOL, "suite": self.suite_spec, "suite_version": self.suite_version, "tasks": rows}

    def close(self) -> None:
        self.verifier.close()


def _for_item(exc: ServiceError, index: int, batch: bool) -> ServiceError:
    """In a batch, a refusal names the item that caused it."""
    if batch:
        exc.message = f"items[{index}]: {exc.message}"
        exc.extra["item"] = index
    return exc


def _versions() -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from amdkv.env import collect_env

    env = collect_env(with_gpu=False)
    out = {k: env.get(k) for k in ("amdkv", "amdkv_git", "python", "torch", "triton", "torch_cuda", "torch_hip")}
    for pkg in ("fastapi", "uvicorn", "pydantic"):
        with contextlib.suppress(PackageNotFoundError):
            out[pkg] = version(pkg)
    out["protocol"] = PROTOCOL
    out["verdict_schema"] = VERDICT_SCHEMA_VERSION
    return out
