"""The one interface every verifier has, and the shared front half of the local ones.

`BaseVerifier` is what callers program against: `verify`, `submit` (a `Future[Verdict]`, safe from
many threads and many callers at once), `verify_many` (built on `submit`), `close`, and the
`platform` and `config` it runs with. Three verifiers implement it:

- `Verifier` (verifier.py): one device, in this process's worker pool;
- `MultiGpuScheduler` (scheduler.py): the GPUs of one machine, one `Verifier` per GPU;
- `RemoteVerifier` (amdkv/serve/client.py): an `amdkv serve` service over HTTP.

`LocalVerifier` is the part the first two share: it reads the task and candidate arguments the one
way (`as_task`, `candidate.as_candidate`), answers from the verdict cache, runs identical in-flight
submissions once (single flight: a GRPO group often holds the same completion several times), and
echoes the candidate's hash in every verdict. Subclasses only start the actual work (`_start`).

Light import: standard library and amdkv's own light modules only (no torch, no triton).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import logging
import os
import shutil
import tempfile
import threading
import time
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterable

from amdkv.config import VerifierConfig
from amdkv.errors import AmdkvError, BadInputError
from amdkv.verify.candidate import Candidate, as_candidate
from amdkv.verify.platform import PlatformInfo
from amdkv.verify.temp_folders import make_temp_folder
from amdkv.verify.verdict import INFRA_ERROR, Verdict, infra_error_verdict
from amdkv.verify.verdict_cache import VerdictCache, verdict_key, verifier_identity

TaskArg = Any          # a `amdkv.tasks.types.Task` or the path of a task file
CandidateArg = Any     # a `Candidate` or the path of a candidate file
OnResult = Callable[[Any, Any, Verdict], None]

# Every infra_error a local verifier hands out is logged here (WARNING): the verdict goes to a
# caller that may only count it, and a harness failure on a loaded machine is otherwise seen by
# nobody who could find its cause. The test suite writes these records to a file it prints at
# the end (tests/conftest.py).
log = logging.getLogger("amdkv.verify")


def log_infra_error(fut: "Future[Verdict]") -> None:
    """Done-callback: log the verdict when it is an infra_error (reason, task, diagnostics' tail)."""
    if fut.cancelled() or fut.exception() is not None:
        return
    v = fut.result()
    if v.status == INFRA_ERROR:
        log.warning("infra_error (%s) for task %s on %s: %s", v.reason, v.task_id, v.platform,
                    (v.diagnostics or "")[-2000:])


class BaseVerifier(abc.ABC):
    """What every verifier offers. Use as a context manager (or call `close()`)."""

    platform: PlatformInfo
    config: VerifierConfig

    @abc.abstractmethod
    def submit(self, task: TaskArg, candidate: CandidateArg = None, *, source: str | None = None,
               language: str | None = None, deadline: float | None = None) -> "Future[Verdict]":
        """Start verifying; the future's result is the Verdict. Bad input (an unreadable file, a
        task that does not load) raises here, before anything runs. `deadline` (time.monotonic()):
        work not started by then comes back as `infra_error` / `not_started_before_deadline`."""

    def verify(self, task: TaskArg, candidate: CandidateArg = None, *, source: str | None = None,
               language: str | None = None) -> Verdict:
        """Verify one candidate: `verify(task, Candidate(text))`, `verify(task, source=text)` or
        `verify(task, "path/to/candidate.py")`."""
        return self.submit(task, candidate, source=source, language=language).result()

    def verify_many(self, pairs: Iterable[tuple[TaskArg, CandidateArg]], on_result: OnResult | None = None, *,
                    deadline: float | None = None) -> list[Verdict]:
        """Verdicts in input order. Every pair is read first (bad input raises before anything
        runs); `on_result(task, candidate, verdict)` is called as each finishes, from the thread
        that finished it, with the arguments exactly as given."""
        pairs = list(pairs)
        prepared = [self._prepare(t, c) for t, c in pairs]
        futures = [self._submit_prepared(p, deadline) for p in prepared]
        called: list[Future[None]] = []
        if on_result is not None:
            for (task, cand), fut in zip(pairs, futures):
                called.append(Future())
                fut.add_done_callback(_callback(on_result, task, cand, called[-1]))
        verdicts = [f.result() for f in futures]
        # a future's waiters wake before its callbacks run: without this, a caller that reads what
        # `on_result` stored could run ahead of the last callback (seen when cancel() ended a run)
        for c in called:
            c.result()
        return verdicts

    # Subclasses that can read arguments ahead override these two; the default is submit().
    def _prepare(self, task: TaskArg, candidate: CandidateArg) -> Any:
        return (task, candidate)

    def _submit_prepared(self, prepared: Any, deadline: float | None) -> "Future[Verdict]":
        task, cand = prepared
        return self.submit(task, cand, deadline=deadline)

    def close(self) -> None:
        """Release processes, threads and temp files."""

    def cancel(self) -> None:
        """Stop now and release everything, without waiting for work in flight: what it returns is
        `infra_error` / `verifier_closed`, never a candidate's verdict (`amdkv gen` on SIGTERM).
        Verifiers that cannot stop their running work any faster close as `close()` does."""
        self.close()

    def __enter__(self) -> "BaseVerifier":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _callback(on_result: OnResult, task: Any, cand: Any, called: "Future[None]") -> Callable[["Future[Verdict]"], None]:
    def done(fut: "Future[Verdict]") -> None:
        try:
            if fut.cancelled() or fut.exception() is not None:
                return
            with contextlib.suppress(Exception):  # a progress callback must never lose a verdict
                on_result(task, cand, fut.result())
        finally:
            called.set_result(None)
    return done


def as_task(task: TaskArg) -> Any:
    """A Task, or the Task of a task file (loading imports it: tasks are trusted code)."""
    from amdkv.tasks.types import Task

    if isinstance(task, Task):
        return task
    if isinstance(task, (str, os.PathLike)):
        from amdkv.tasks.loader import load_task

        return load_task(task)
    raise BadInputError(f"a task is a Task or the path of a task file, not {type(task).__name__}",
                        hint="load it with amdkv.tasks.loader.load_task(path) or pass the path")


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A submission read and keyed: what the local verifiers run and cache."""

    task: Any               # amdkv.tasks.types.Task
    candidate: Candidate
    key: str


class LocalVerifier(BaseVerifier):
    """Cache, single flight and argument handling in front of a local engine (`_start`)."""

    def __init__(self, config: VerifierConfig, platform: PlatformInfo, device_description: str) -> None:
        self.config = config
        self.platform = platform
        self.device_description = device_description
        self._cache = VerdictCache(config.cache_path / "verdicts", enabled=config.verdict_cache)
        self._identity: str | None = None
        self._inflight: dict[str, list[Future[Verdict]]] = {}
        self._inflight_lock = threading.Lock()
        self._scratch = make_temp_folder("candidates")  # named by this pid: see temp_folders
        self._closed = False

    # ------------------------------------------------------------------ subclass hooks
    @abc.abstractmethod
    def _start(self, task: Any, candidate: Candidate, deadline: float | None) -> "Future[Verdict]":
        """Begin the real verification in the background; the future always gets a Verdict."""

    def _run_inline(self, task: Any, candidate: Candidate) -> Verdict:
        """The real verification for `verify()`: by default the background path, waited for."""
        return self._start(task, candidate, None).result()

    # ------------------------------------------------------------------ public
    def submit(self, task: TaskArg, candidate: CandidateArg = None, *, source: str | None = None,
               language: str | None = None, deadline: float | None = None) -> "Future[Verdict]":
        return self._submit_prepared(self._prepare(task, candidate, source=source, language=language), deadline)

    def verify(self, task: TaskArg, candidate: CandidateArg = None, *, source: str | None = None,
               language: str | None = None) -> Verdict:
        """As BaseVerifier.verify; a one-device Verifier runs it in the calling thread, so callers
        that bring their own threads get their own concurrency (config.jobs bounds `submit` only)."""
        prepared = self._prepare(task, candidate, source=source, language=language)
        return self._submit_prepared(prepared, None, inline=True).result()

    def _prepare(self, task: TaskArg, candidate: CandidateArg, *, source: str | None = None,
                 language: str | None = None) -> Prepared:
        if self._closed:
            raise AmdkvError("this verifier is closed", hint="open a new one (use it as a context manager)")
        task = as_task(task)
        cand = as_candidate(candidate, source=source, language=language)
        key = verdict_key(task_id=task.id, task_source_hash=task.source_hash,
                          suite_version=task.metadata.get("suite_version"), candidate_sha256=cand.sha256,
                          language=cand.language, identity=self.identity)
        return Prepared(task, cand, key)

    def _submit_prepared(self, prepared: Prepared, deadline: float | None, inline: bool = False) -> "Future[Verdict]":
        mine: Future[Verdict] = Future()
        mine.set_running_or_notify_cancel()
        hit = self._cache.get(prepared.key)
        if hit is not None:
            hit.candidate_sha256 = prepared.candidate.sha256
            mine.set_result(hit)
            return mine
        if not self.config.verdict_cache:  # no sharing of in-flight work either: always run
            return self._launch(prepared, deadline, inline)
        with self._inflight_lock:
            waiters = self._inflight.get(prepared.key)
            if waiters is not None:  # the same verification is running: share its verdict
                waiters.append(mine)
                return mine
            self._inflight[prepared.key] = [mine]
        self._launch(prepared, deadline, inline).add_done_callback(lambda f: self._settle(prepared, f))
        return mine

    def _launch(self, prepared: Prepared, deadline: float | None, inline: bool) -> "Future[Verdict]":
        """Start the run (inline: run it now, in this thread); a failure to start is infra_error.
        Every run starts here, so this is where an infra_error verdict is logged (log_infra_error)."""
        fut: Future[Verdict]
        try:
            if not inline:
                fut = self._start(prepared.task, prepared.candidate, deadline)
            else:
                fut = Future()
                fut.set_result(self._run_inline(prepared.task, prepared.candidate))
        except Exception as exc:  # noqa: BLE001 - a start-up failure is the harness's, never the candidate's
            fut = Future()
            fut.set_result(self.infra_verdict(prepared.task, prepared.candidate, exc))
        fut.add_done_callback(log_infra_error)
        return fut

    def _settle(self, prepared: Prepared, fut: "Future[Verdict]") -> None:
        """The run finished: store it, hand the first waiter the verdict and the others copies
        marked as shared (they were not run for them)."""
        try:
            verdict = fut.result()
        except BaseException as exc:  # noqa: BLE001 - must resolve every waiter
            verdict = self.infra_verdict(prepared.task, prepared.candidate, exc)
        verdict.candidate_sha256 = prepared.candidate.sha256
        verdict.cache_key = prepared.key
        self._cache.put(prepared.key, verdict)
        with self._inflight_lock:
            waiters = self._inflight.pop(prepared.key, [])
        for i, waiter in enumerate(waiters):
            if i == 0:
                waiter.set_result(verdict)
            else:
                shared = Verdict.from_dict(verdict.to_dict())
                shared.cache_hit = verdict.status != INFRA_ERROR
                waiter.set_result(shared)

    @property
    def identity(self) -> str:
        """Hash of this verifier's versions, verdict-affecting settings, platform and device."""
        if self._identity is None:
            from amdkv.verify.os_sandbox import status

            settings = dict(self.config.verdict_settings())
            # what the OS sandbox holds on this machine changes what a candidate can get away with
            settings["sandbox_applied"] = status(self.config.sandbox)["applied"]
            self._identity = verifier_identity(settings, self.platform.name, self.device_description)
        return self._identity

    # ------------------------------------------------------------------ helpers for subclasses
    def closed_verdict(self, task: Any, candidate: Candidate | None) -> Verdict:
        """What work that ran while the verifier was cancelled returns instead of its own verdict
        (its worker was killed: never the candidate's verdict)."""
        return self.infra_verdict(task, candidate, "the verifier was cancelled while this ran", reason=VERIFIER_CLOSED)

    def infra_verdict(self, task: Any, candidate: Candidate | None, exc: BaseException | str,
                      reason: str = "harness_failure") -> Verdict:
        """The one way a local verifier reports its own failure: infra_error, never a candidate fault."""
        text = exc if isinstance(exc, str) else (
            str(exc) if isinstance(exc, AmdkvError) else
            f"{type(exc).__name__}: {exc}\n{''.join(traceback.format_exception(exc))[-3000:]}")
        return infra_error_verdict(reason, text.strip(), task_id=getattr(task, "id", None),
                                   language=None if candidate is None else candidate.language,
                                   platform=self.platform.name, device=self.device_description,
                                   candidate_sha256=candidate.sha256 if candidate is not None else None)

    @contextlib.contextmanager
    def candidate_file(self, candidate: Candidate, program: str | None = None):
        """The candidate's text in a private file for the worker (removed afterwards): Triton's
        `@jit` reads its source from a file, and a caller's file may change while it is judged.
        `program`: the text to write instead, when the task wraps the candidate (verify/program.py)."""
        folder = tempfile.mkdtemp(dir=self._scratch)
        path = Path(folder) / "candidate.py"
        path.write_text(candidate.source if program is None else program)
        try:
            yield path
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self._closed = True
        shutil.rmtree(self._scratch, ignore_errors=True)


# `infra_error` reasons of work a caller's deadline cut: not started by then, or (amdkv serve) still
# running then. Not a failure of the candidate or the machine, so callers (gen's wall budget, eval's
# budget) leave such work for a re-run.
NOT_STARTED_BEFORE_DEADLINE = "not_started_before_deadline"
# `infra_error` reason of work the verifier's own close() or cancel() ended (queued, or running when cancelled)
VERIFIER_CLOSED = "verifier_closed"
DEADLINE_EXCEEDED = "deadline_exceeded"
DEADLINE_REASONS = (NOT_STARTED_BEFORE_DEADLINE, DEADLINE_EXCEEDED)


def deadline_passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() > deadline

