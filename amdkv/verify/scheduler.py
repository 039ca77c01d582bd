"""One scheduler per GPU: (task, candidate) pairs spread over the GPUs of one machine.

Each GPU gets its own `Verifier` (so its own warm spares, `cuda:N`, its own timing lock) and
`jobs_per_gpu` threads that take pairs from one shared queue. Within a GPU, compiles, reference
work and correctness runs of concurrent candidates overlap; timed sections are exclusive per GPU
through the timing lock (timing.exclusive_gpu), so a GPU never times two things at once.

Faults. A candidate that faults the GPU context (illegal address: its process dies or reports a
CUDA/HIP error) or hangs past its timeout has its process group killed by the verifier and gets
`runtime_error` / `timeout` as usual. After such a *suspect* verdict the GPU is health-checked
(a fresh process allocates, runs a kernel and synchronises within a few seconds) before the
next candidate starts on it. If the check fails the GPU is quarantined: no new candidate starts
on it; pairs that would have run there, and suspect verdicts obtained on it, are retried on
another healthy GPU (at most `max_attempts` runs per pair); when no healthy GPU is left they
become `infra_error` (reason `gpu_quarantined`), never a candidate's fault.

Decision: the candidate whose suspect verdict triggered a failed health check is itself retried
elsewhere (once, by default): a GPU that fails its health check may have been broken before
the candidate ran, and `infra_error` must never be blamed on a candidate. If it fails the same
way on the second GPU, that verdict stands (and that GPU is checked in turn).

Everything here is plain threads and callables, so the logic is unit-tested on CPU with fake
verifiers and health checks (tests/test_scheduler.py).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Protocol, Sequence

from amdkv.config import VerifierConfig, resolve_config
from amdkv.errors import AmdkvError
from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE, VERIFIER_CLOSED, LocalVerifier, deadline_passed
from amdkv.verify.candidate import Candidate
from amdkv.verify.verdict import INFRA_ERROR, RUNTIME_ERROR, TIMEOUT, Verdict

# Text in a verdict's diagnostics that means the GPU context itself failed (CUDA and HIP spellings).
GPU_FAULT_PATTERNS = (
    "illegal memory access", "illegal address", "an illegal instruction", "misaligned address",
    "unspecified launch failure", "device-side assert", "uncorrectable ecc", "cuda error", "hip error",
    "hiperror", "cudaerror", "gpu has fallen off the bus", "memory access fault", "hsa_status_error",
    "acceleratorerror", "launch timed out", "cuda driver error", "device not ready",
)

HEALTH_CHECK_TIMEOUT_S = 60.0
HEALTH_SCRIPT = r"""
import sys, time
t0 = time.monotonic()
import torch
idx = int(sys.argv[1])
t1 = time.monotonic()
torch.cuda.set_device(idx)
dev = torch.device("cuda", idx)
n = 1 << 20
x = torch.arange(n, device=dev, dtype=torch.float32)
y = x * 2.0 + 1.0
torch.cuda.synchronize(dev)
got = float(y[-1].item())
want = 2.0 * (n - 1) + 1.0
t2 = time.monotonic()
print(f"HEALTH ok={got == want} got={got} want={want} import_s={t1 - t0:.2f} gpu_s={t2 - t1:.2f}", flush=True)
sys.exit(0 if got == want else 3)
"""


class GpuEngine(Protocol):
    """What the scheduler needs of each GPU's verifier (a `Verifier` for that GPU)."""

    platform: Any

    def verify_now(self, task: Any, candidate: Candidate) -> Verdict: ...

    def close(self) -> None: ...


@dataclasses.dataclass
class HealthResult:
    ok: bool
    detail: str
    seconds: float


def subprocess_health_check(index: int, timeout: float = HEALTH_CHECK_TIMEOUT_S) -> HealthResult:
    """Fresh process: allocate on GPU `index`, run a kernel, synchronise, check the result."""
    from amdkv.verify.sandbox import run_process

    t0 = time.monotonic()
    res = run_process([sys.executable, "-c", HEALTH_SCRIPT, str(index)], timeout=timeout)
    ok = res.returncode == 0 and not res.timed_out and "HEALTH ok=True" in res.stdout
    detail = (res.stdout.strip() or "") + ("" if ok else f" rc={res.returncode} timed_out={res.timed_out} "
                                           f"stderr={res.stderr.strip()[-800:]}")
    return HealthResult(ok, detail.strip(), time.monotonic() - t0)


def gpu_suspect(verdict: Verdict) -> str | None:
    """Why this verdict might mean the GPU (not only the candidate) is in trouble; None if not."""
    if verdict.status == TIMEOUT:
        return "timeout"
    if verdict.status == INFRA_ERROR:
        return "infra_error"
    if verdict.status == RUNTIME_ERROR:
        reason = verdict.reason or ""
        if reason.startswith(("crashed:", "exit_code:")) or reason == "process_exited":
            return f"process_died:{reason}"
        text = (verdict.diagnostics or "").lower()
        if any(p in text for p in GPU_FAULT_PATTERNS):
            return "gpu_error"
    return None


@dataclasses.dataclass
class _Item:
    task: Any
    candidate: Candidate
    future: "Future[Verdict]"
    deadline: float | None = None
    excluded: set[int] = dataclasses.field(default_factory=set)
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class _Gpu:
    def __init__(self, index: int, engine: GpuEngine) -> None:
        self.index = index
        self.verifier = engine
        self.quarantined = False
        self.quarantine_detail: str | None = None
        self.check_pending = False     # a suspect verdict arrived: check before the next start
        self.checking = False
        self.check_generation = 0      # bumped at each completed check
        self.last_check_ok = True
        self.running = 0
        self.started = 0
        self.busy_s = 0.0
        self.checks: list[dict[str, Any]] = []


class MultiGpuScheduler(LocalVerifier):
    """Verify over several GPUs of one machine, one `Verifier` (and `jobs_per_gpu` threads) per GPU.

    `verifier_factory(index)` builds the Verifier of GPU `index`; `health_check(index)` returns a
    HealthResult (default: a fresh subprocess). The GPU threads start with the first submission and
    live until `close()`, taking work from one queue shared by every caller: `submit`, `verify` and
    `verify_many` may be called from many threads at once. Use as a context manager.
    """

    def __init__(self, verifier_factory: Callable[[int], GpuEngine], gpus: Sequence[int], *,
                 config: VerifierConfig | None = None, jobs_per_gpu: int = 1,
                 health_check: Callable[[int], HealthResult] | None = None, max_attempts: int | None = None,
                 retry_trigger: bool = True) -> None:
        if not gpus:
            raise ValueError("MultiGpuScheduler needs at least one GPU index")
        config = config or VerifierConfig.from_env()
        self.jobs_per_gpu = max(1, jobs_per_gpu)
        self.health_check = health_check or subprocess_health_check
        self.max_attempts = max(1, max_attempts if max_attempts is not None else config.max_attempts)
        self.retry_trigger = retry_trigger
        self._gpus: dict[int, _Gpu] = {}
        try:
            for i in gpus:
                self._gpus[i] = _Gpu(i, verifier_factory(i))
        except BaseException:
            self._close_gpus()
            raise
        first = next(iter(self._gpus.values())).verifier
        super().__init__(config, first.platform, getattr(first, "device_description", first.platform.device))
        self._cond = threading.Condition()
        self._queue: collections.deque[_Item] = collections.deque()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self._cancelled = False

    # ------------------------------------------------------------------ lifecycle
    def _close_gpus(self) -> None:
        for g in list(self._gpus.values()):
            with contextlib.suppress(Exception):  # closing the other GPUs' verifiers matters more
                g.verifier.close()

    def close(self) -> None:
        self._stop_queue()
        for t in self._threads:
            t.join()
        self._close_gpus()
        super().close()

    def cancel(self) -> None:
        """Stop now (BaseVerifier.cancel): the queue ends `verifier_closed`, each GPU's verifier is
        cancelled (its running workers killed), and the GPU threads are not waited for: what they
        still return is `verifier_closed` too."""
        self._cancelled = True
        self._stop_queue()
        for g in list(self._gpus.values()):
            with contextlib.suppress(Exception):  # cancelling the other GPUs' verifiers matters more
                getattr(g.verifier, "cancel", g.verifier.close)()
        super().close()

    def _stop_queue(self) -> None:
        with self._cond:
            self._stopping = True
            while self._queue:  # nothing will run them any more: the harness's fault, never the candidate's
                item = self._queue.popleft()
                self._resolve(item, self.infra_verdict(item.task, item.candidate, "the verifier was closed",
                                                      reason=VERIFIER_CLOSED))
            self._cond.notify_all()

    @property
    def gpus(self) -> list[int]:
        return list(self._gpus)

    def quarantined(self) -> list[int]:
        return [i for i, g in self._gpus.items() if g.quarantined]

    def stats(self) -> dict[str, Any]:
        return {str(i): {"started": g.started, "busy_s": round(g.busy_s, 3), "quarantined": g.quarantined,
                         "quarantine_detail": g.quarantine_detail, "health_checks": g.checks}
                for i, g in self._gpus.items()}

    def queue_depth(self) -> int:
        with self._cond:
            return len(self._queue) + sum(g.running for g in self._gpus.values())

    # ------------------------------------------------------------------ submission
    def _start(self, task: Any, candidate: Candidate, deadline: float | None) -> "Future[Verdict]":
        fut: Future[Verdict] = Future()
        fut.set_running_or_notify_cancel()
        item = _Item(task, candidate, fut, deadline)
        with self._cond:
            if self._stopping:
                raise AmdkvError("this verifier is closed", hint="open a new one")
            self._ensure_threads()
            self._queue.append(item)
            self._resolve_unrunnable()
            self._cond.notify_all()
        return fut

    def _ensure_threads(self) -> None:
        """Start the GPU threads once (caller holds the condition)."""
        if self._threads:
            return
        self._threads = [threading.Thread(target=self._worker, args=(g,), name=f"amdkv-gpu{g.index}-{j}", daemon=True)
                         for g in self._gpus.values() for j in range(self.jobs_per_gpu)]
        for t in self._threads:
            t.start()

    # ------------------------------------------------------------------ internals
    def _healthy(self) -> list[int]:
        return [i for i, g in self._gpus.items() if not g.quarantined]

    def _quarantine_verdict(self, item: _Item) -> Verdict:
        bad = {i: g.quarantine_detail for i, g in self._gpus.items() if g.quarantined}
        return self.infra_verdict(item.task, item.candidate,
                                  f"no healthy GPU left to run this candidate on (quarantined: {bad})",
                                  reason="gpu_quarantined")

    def _resolve(self, item: _Item, verdict: Verdict | None) -> None:
        """Give `item` its final verdict (caller holds the condition)."""
        if verdict is None:
            verdict = self._quarantine_verdict(item)
        verdict.env = dict(verdict.env or {})
        verdict.env["scheduler"] = {"gpu": item.history[-1]["gpu"] if item.history else None,
                                    "attempts": len(item.history), "history": item.history}
        item.future.set_result(verdict)
        self._cond.notify_all()

    def _resolve_unrunnable(self) -> None:
        """Resolve queued items that no healthy GPU may take (caller holds the condition)."""
        healthy = set(self._healthy())
        keep = collections.deque()
        for item in self._queue:
            if healthy - item.excluded:
                keep.append(item)
            else:
                self._resolve(item, None)
        self._queue = keep

    def _take(self, g: _Gpu) -> _Item | None:
        """Next item for GPU `g`, after any pending health check; None when this thread ends."""
        with self._cond:
            while True:
                if self._stopping or g.quarantined:
                    return None
                if not (g.check_pending or g.checking):
                    for k, item in enumerate(self._queue):
                        if g.index in item.excluded:
                            continue
                        del self._queue[k]
                        if deadline_passed(item.deadline):
                            self._resolve(item, self.infra_verdict(item.task, item.candidate,
                                                                   "not started before the caller's deadline",
                                                                   reason=NOT_STARTED_BEFORE_DEADLINE))
                            break  # look at the queue again from the start
                        g.running += 1
                        g.started += 1
                        return item
                    else:
                        self._cond.wait(timeout=1.0)
                    continue
                self._cond.wait(timeout=1.0)

    def _worker(self, g: _Gpu) -> None:
        while True:
            item = self._take(g)
            if item is None:
                return
            t0 = time.monotonic()
            try:
                verdict = g.verifier.verify_now(item.task, item.candidate)
            except Exception as exc:  # noqa: BLE001 - a bug in one verify must not stop the GPU's thread
                verdict = self.infra_verdict(item.task, item.candidate, exc)
            if self._cancelled:  # its worker was killed by cancel(): not the candidate's verdict, no health check
                with self._cond:
                    g.running -= 1
                    self._resolve(item, self.closed_verdict(item.task, item.candidate))
                continue
            elapsed = time.monotonic() - t0
            suspect = gpu_suspect(verdict)
            item.history.append({"gpu": g.index, "status": verdict.status, "reason": verdict.reason,
                                 "seconds": round(elapsed, 3), "suspect": suspect})
            healthy = True
            if suspect:
                healthy = self._check(g, suspect)
            with self._cond:
                g.running -= 1
                g.busy_s += elapsed
                if healthy and not g.quarantined:
                    self._resolve(item, verdict)
                    continue
                if suspect is None:
                    # finished fine on a GPU quarantined meanwhile: an ok/mismatch/compile_error
                    # verdict does not depend on the GPU's later failure
                    self._resolve(item, verdict)
                    continue
                item.excluded.add(g.index)
                retry = len(item.history) < self.max_attempts and bool(set(self._healthy()) - item.excluded)
                if retry and (self.retry_trigger or verdict.status == INFRA_ERROR) and not self._stopping:
                    item.history[-1]["retried"] = True
                    self._queue.appendleft(item)
                    self._cond.notify_all()
                elif verdict.status == INFRA_ERROR:
                    self._resolve(item, None)
                else:
                    verdict.diagnostics = (verdict.diagnostics + f"\n[scheduler] GPU {g.index} failed its health "
                                           f"check after this candidate and was quarantined").strip()
                    self._resolve(item, verdict)
                self._resolve_unrunnable()

    def _check(self, g: _Gpu, why: str) -> bool:
        """Health-check GPU `g` before its next candidate; one check at a time per GPU."""
        with self._cond:
            if g.quarantined:
                return False
            if g.checking:  # another thread on this GPU is already checking: share its result
                gen = g.check_generation
                while g.checking and g.check_generation == gen:
                    self._cond.wait(timeout=1.0)
                return g.last_check_ok and not g.quarantined
            g.check_pending = True
            g.checking = True
        try:
            res = self.health_check(g.index)
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is a failed check
            res = HealthResult(False, f"health check raised {type(exc).__name__}: {exc}", 0.0)
        with self._cond:
            g.checks.append({"after": why, "ok": res.ok, "detail": res.detail[:500], "seconds": round(res.seconds, 2)})
            g.last_check_ok = res.ok
            g.checking = False
            g.check_pending = False
            g.check_generation += 1
            if not res.ok:
                g.quarantined = True
                g.quarantine_detail = f"after {why}: {res.detail[:300]}"
                self._resolve_unrunnable()
            self._cond.notify_all()
            return res.ok


# ---------------------------------------------------------------------------- construction
def gpu_count(platform_name: str) -> int:
    if platform_name not in ("cuda", "rocm"):
        return 0
    import torch

    return torch.cuda.device_count()


def open_verifier(config: VerifierConfig | str | None = None, *, platform: Any = None,
                  health_check: Callable[[int], HealthResult] | None = None, **settings: Any) -> LocalVerifier:
    """The verifier a config asks for: a `Verifier` for one device, or a `MultiGpuScheduler` when
    the platform is a GPU one and several GPUs are selected (`config.gpus`: None = every visible
    one). `config.jobs` = candidates verified at the same time in total (split over the GPUs).
    The platform is detected here, once (or taken from `platform`), and handed to every per-GPU
    Verifier."""
    from amdkv.verify.platform import detect_platform
    from amdkv.verify.verifier import Verifier

    config = resolve_config(config, **settings)
    platform = platform or detect_platform(config.device)
    indices = config.gpu_indices(gpu_count(platform.name))
    if len(indices) <= 1:
        index = indices[0] if indices else 0
        return Verifier(config, platform=platform.for_device(index), device_index=index)
    per_gpu = max(1, math.ceil(config.jobs / len(indices)))
    gpu_config = config.replace(jobs=per_gpu, spares=config.spares if config.spares is not None else per_gpu)

    def factory(i: int) -> Verifier:
        return Verifier(gpu_config, platform=platform.for_device(i), device_index=i)

    return MultiGpuScheduler(factory, indices, config=config, jobs_per_gpu=per_gpu, health_check=health_check)
