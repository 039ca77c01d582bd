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
import dataclasses
import math
import sys
import threading
import time
from typing import Any, Callable, Iterable, Protocol, Sequence

from amdkv.errors import AmdkvError
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


class VerifierLike(Protocol):
    platform: Any

    def verify(self, task: Any, candidate: Any) -> Verdict: ...

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
    index: int
    task: Any
    candidate: Any
    attempt: int = 0
    excluded: set[int] = dataclasses.field(default_factory=set)
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)


class _Gpu:
    def __init__(self, index: int, verifier: VerifierLike) -> None:
        self.index = index
        self.verifier = verifier
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


class MultiGpuScheduler:
    """Verify many pairs over several GPUs, one scheduler (Verifier + threads) per GPU.

    `verifier_factory(index)` builds the Verifier of GPU `index`; `health_check(index)` returns a
    HealthResult (default: a fresh subprocess). Use as a context manager.
    """

    def __init__(self, verifier_factory: Callable[[int], VerifierLike], gpus: Sequence[int], *,
                 jobs_per_gpu: int = 1, health_check: Callable[[int], HealthResult] | None = None,
                 max_attempts: int = 2, retry_trigger: bool = True) -> None:
        if not gpus:
            raise ValueError("MultiGpuScheduler needs at least one GPU index")
        self.jobs_per_gpu = max(1, jobs_per_gpu)
        self.health_check = health_check or subprocess_health_check
        self.max_attempts = max(1, max_attempts)
        self.retry_trigger = retry_trigger
        self._gpus: dict[int, _Gpu] = {}
        try:
            for i in gpus:
                self._gpus[i] = _Gpu(i, verifier_factory(i))
        except BaseException:
            self.close()
            raise
        first = next(iter(self._gpus.values())).verifier
        self.platform = first.platform
        self._cond = threading.Condition()
        self._queue: collections.deque[_Item] = collections.deque()
        self._results: dict[int, Verdict] = {}
        self._total = 0
        self._deadline: float | None = None
        self._on_result: Callable[[Any, Any, Verdict], None] | None = None

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        for g in list(self._gpus.values()):
            try:
                g.verifier.close()
            except Exception:  # noqa: BLE001 - closing the others matters more
                pass

    def __enter__(self) -> "MultiGpuScheduler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def gpus(self) -> list[int]:
        return list(self._gpus)

    def quarantined(self) -> list[int]:
        return [i for i, g in self._gpus.items() if g.quarantined]

    def stats(self) -> dict[str, Any]:
        return {str(i): {"started": g.started, "busy_s": round(g.busy_s, 3), "quarantined": g.quarantined,
                         "quarantine_detail": g.quarantine_detail, "health_checks": g.checks}
                for i, g in self._gpus.items()}

    # ------------------------------------------------------------------ one pair (Verifier API)
    def verify(self, task: Any, candidate: Any) -> Verdict:
        return self.verify_many([(task, candidate)])[0]

    # ------------------------------------------------------------------ many pairs
    def verify_many(self, pairs: Iterable[tuple[Any, Any]],
                    on_result: Callable[[Any, Any, Verdict], None] | None = None, *,
                    deadline: float | None = None) -> list[Verdict]:
        """Verdicts in input order. `deadline` (time.monotonic()): pairs not started by then are
        not run and come back as infra_error with reason `not_started_before_deadline`
        (benchmarks and services that must drain)."""
        pairs = list(pairs)
        self._deadline = deadline
        with self._cond:
            self._queue = collections.deque(_Item(i, t, c) for i, (t, c) in enumerate(pairs))
            self._results = {}
            self._total = len(pairs)
            self._on_result = on_result
            self._resolve_unrunnable()
        threads = [threading.Thread(target=self._worker, args=(g,), name=f"amdkv-gpu{g.index}-{j}", daemon=True)
                   for g in self._gpus.values() for j in range(self.jobs_per_gpu)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._cond:  # anything left (every GPU quarantined mid-run) is an infra_error
            while self._queue:
                self._finalize(self._queue.popleft(), None)
        return [self._results[i] for i in range(len(pairs))]

    # ------------------------------------------------------------------ internals
    def _healthy(self) -> list[int]:
        return [i for i, g in self._gpus.items() if not g.quarantined]

    def _infra_verdict(self, item: _Item) -> Verdict:
        tid = getattr(item.task, "id", None)
        bad = {i: g.quarantine_detail for i, g in self._gpus.items() if g.quarantined}
        return Verdict(status=INFRA_ERROR, reason="gpu_quarantined", task_id=tid,
                       platform=getattr(self.platform, "name", None),
                       diagnostics=f"no healthy GPU left to run this candidate on (quarantined: {bad})")

    def _finalize(self, item: _Item, verdict: Verdict | None) -> None:
        """Record the final verdict of `item` (caller holds the condition)."""
        if verdict is None:
            verdict = self._infra_verdict(item)
        verdict.env = dict(verdict.env or {})
        verdict.env["scheduler"] = {"gpu": item.history[-1]["gpu"] if item.history else None,
                                    "attempts": len(item.history), "history": item.history}
        self._results[item.index] = verdict
        self._cond.notify_all()
        if self._on_result:
            try:
                self._on_result(item.task, item.candidate, verdict)
            except Exception:  # noqa: BLE001 - a progress callback must not kill a GPU thread
                pass

    def _resolve_unrunnable(self) -> None:
        """Finalize queued items that no healthy GPU may take (caller holds the condition)."""
        healthy = set(self._healthy())
        keep = collections.deque()
        for item in self._queue:
            if healthy - item.excluded:
                keep.append(item)
            else:
                self._finalize(item, None)
        self._queue = keep

    def _take(self, g: _Gpu) -> _Item | None:
        """Next item for GPU `g`, after any pending health check; None when this thread is done."""
        with self._cond:
            while True:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    while self._queue:
                        item = self._queue.popleft()
                        self._finalize(item, Verdict(status=INFRA_ERROR, reason="not_started_before_deadline",
                                                     task_id=getattr(item.task, "id", None),
                                                     platform=getattr(self.platform, "name", None)))
                if g.quarantined or len(self._results) >= self._total:
                    return None
                if not (g.check_pending or g.checking):
                    for k, item in enumerate(self._queue):
                        if g.index not in item.excluded:
                            del self._queue[k]
                            g.running += 1
                            g.started += 1
                            return item
                self._cond.wait(timeout=1.0)

    def _worker(self, g: _Gpu) -> None:
        while True:
            item = self._take(g)
            if item is None:
                return
            t0 = time.monotonic()
            try:
                verdict = g.verifier.verify(item.task, item.candidate)
            except AmdkvError as exc:
                verdict = Verdict(status=INFRA_ERROR, reason="harness_failure", task_id=getattr(item.task, "id", None),
                                  platform=getattr(self.platform, "name", None), diagnostics=str(exc))
            except Exception as exc:  # noqa: BLE001 - a bug in one verify must not stop the GPU's thread
                verdict = Verdict(status=INFRA_ERROR, reason="harness_failure", task_id=getattr(item.task, "id", None),
                                  platform=getattr(self.platform, "name", None),
                                  diagnostics=f"{type(exc).__name__}: {exc}")
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
                    self._finalize(item, verdict)
                    continue
                if suspect is None:
                    # finished fine on a GPU quarantined meanwhile: an ok/mismatch/compile_error
                    # verdict does not depend on the GPU's later failure
                    self._finalize(item, verdict)
                    continue
                item.excluded.add(g.index)
                retry = len(item.history) < self.max_attempts and bool(set(self._healthy()) - item.excluded)
                if retry and (self.retry_trigger or verdict.status == INFRA_ERROR):
                    item.history[-1]["retried"] = True
                    self._queue.appendleft(item)
                    self._cond.notify_all()
                elif verdict.status == INFRA_ERROR:
                    self._finalize(item, None)
                else:
                    verdict.diagnostics = (verdict.diagnostics + f"\n[scheduler] GPU {g.index} failed its health "
                                           f"check after this candidate and was quarantined").strip()
                    self._finalize(item, verdict)
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


def open_verifier(device: str = "auto", *, gpus: int | Sequence[int] | None = None, jobs: int = 1,
                  health_check: Callable[[int], HealthResult] | None = None, **verifier_kw: Any) -> Any:
    """A Verifier for one device, or a MultiGpuScheduler when the platform is a GPU one and
    several GPUs are visible (or `gpus` asks for several).

    `gpus`: None = every visible GPU, an int = the first N, a sequence = those indices.
    `jobs` = candidates verified at the same time in total (split over the GPUs).
    """
    from amdkv.verify.platform import detect_platform
    from amdkv.verify.verifier import Verifier

    platform = detect_platform(device)
    n_visible = gpu_count(platform.name)
    if isinstance(gpus, int):
        indices = list(range(min(gpus, n_visible)))
    elif gpus is None:
        indices = list(range(n_visible))
    else:
        indices = [i for i in gpus if i < n_visible]
    if len(indices) <= 1:
        kw = dict(verifier_kw)
        kw.setdefault("spares", jobs)
        return Verifier(device, device_index=indices[0] if indices else 0, **kw)
    per_gpu = max(1, math.ceil(jobs / len(indices)))
    kw = dict(verifier_kw)
    kw.setdefault("spares", per_gpu)

    def factory(i: int) -> Any:
        return Verifier(platform.name, device_index=i, **kw)

    return MultiGpuScheduler(factory, indices, jobs_per_gpu=per_gpu, health_check=health_check)
