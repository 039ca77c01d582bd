"""Checks of procedural tasks: the fast trusted batch checker, and the verifier on a stratified sample.

Two paths, never confused in outputs or docs:

- **fast** (`check_tasks`): for every task, in a pool of worker processes under the Triton CPU
  interpreter: the reference checks of amdkv.tasks.checks (runs twice with the verifier's seeds,
  bitwise deterministic, outputs not degenerate), then the templated solution in the same process:
  the verifier's static checks on its source, its kernels run on the very inputs the reference
  saw (launch counted, aten compute in forward recorded, as the verifier's worker does), outputs
  judged with the verifier's tolerance policy (amdkv.verify.compare.compare_case). Trusted because
  the solutions are our own generated code: no sandbox, no fresh process per task, no guard bytes,
  no poisoned allocations, no re-check call. About 0.1 s of a core per task instead of ~1 s.
- **verifier** (`verify_sample`): amdkv.verify.Verifier, every check on, on a sample stratified by
  template x dtype (or core x dtype), so every code template of every dtype goes through the real
  thing. Only these verdicts may be called "verified by the verifier".
"""

from __future__ import annotations

import collections
import dataclasses
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Callable, Iterable

from amdkv.tasks.types import Task

FAST = "fast"          # the trusted in-process batch checker
VERIFIER = "verifier"  # amdkv.verify.Verifier
CHUNK = 8              # tasks per worker round trip
MIN_DISTINCT = 8       # a generated task's output has at least this many distinct values (or half its elements)


@dataclasses.dataclass
class TaskCheck:
    """One task's check. `path` says which checker produced it (FAST or VERIFIER)."""

    task_id: str
    path: str
    ok: bool
    stage: str = ""            # reference | solution (fast); the verdict status (verifier)
    reason: str | None = None
    message: str = ""
    template: str = ""
    dtype: str = ""
    split: str = ""
    platform: str = "cpu"      # where it ran: the fast path runs on the CPU interpreter
    seconds: float = 0.0
    cpu_seconds: float = 0.0   # CPU time of the checking process (the fast path; 0 for the verifier)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def solution_file(task: Task, language: str = "triton") -> str | None:
    """The task's templated solution in `language` (METADATA["solutions"]), as a string path."""
    from amdkv.tasks.solutions import solution_for

    path = solution_for(task, language)
    return str(path) if path else None


# ------------------------------------------------------------------------------- worker side
_WORKER: dict[str, Any] = {}


def _worker_init() -> None:
    """Each fast-check worker: the interpreter on, one torch thread, one launch counter, a work dir."""
    os.environ["TRITON_INTERPRET"] = "1"
    import warnings

    import torch

    # Masked-out lanes of a tile compute log(0), inf * 0, ... and are never stored: numpy's warnings
    # about them under the interpreter say nothing about the task.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")

    torch.set_num_threads(1)
    from amdkv.verify import interpreter_helpers, interpreter_numpy
    from amdkv.verify.runtime_guards import LaunchCounter

    interpreter_helpers.install()  # as the verifier's workers: tl.sum & co. without re-patching
    interpreter_numpy.install_if_interpreting()  # and scalar loop bounds under NumPy 2.4+
    counter = LaunchCounter()
    counter.install()
    _WORKER.update(counter=counter, workdir=tempfile.mkdtemp(prefix="amdkv-proc-check-"))


def _run_solution(task: Task, solution_path: str, cases: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """(reason, message) of the first failure of the solution on the reference's own data, or (None, "")."""
    import torch

    from amdkv.tasks.loader import import_source_file
    from amdkv.verify import static_checks
    from amdkv.verify.compare import compare_case, flatten_outputs
    from amdkv.verify.runtime_guards import TorchOpRecorder

    source = Path(solution_path).read_text()
    findings = static_checks.check_source(source, language="triton", filename=solution_path)
    if findings:
        return f"static:{findings[0].code}", "\n".join(map(str, findings))[:1500]
    try:
        module = import_source_file(solution_path, "amdkv_proc_solution")
    except Exception as exc:  # noqa: BLE001
        return "solution_import_error", f"{type(exc).__name__}: {exc}"[:1500]
    counter = _WORKER["counter"]
    for name, data in cases.items():
        inputs, expected = data["inputs"], data["expected"]
        try:
            torch.manual_seed(inputs["init_seed"])
            model = module.ModelNew(*inputs["init_inputs"])
            own = model.state_dict()
            model.load_state_dict({k: v for k, v in inputs["state_dict"].items()
                                   if k in own and tuple(own[k].shape) == tuple(v.shape)}, strict=False)
        except Exception as exc:  # noqa: BLE001
            return "solution_init_error", f"case {name}: {type(exc).__name__}: {exc}"[:1500]
        memo: dict[Any, Any] = {}
        for t, trial_inputs in enumerate(inputs["trials"]):
            call_inputs = [x.clone() if isinstance(x, torch.Tensor) else x for x in trial_inputs]
            recorder = TorchOpRecorder()
            counter.recorder, before = recorder, counter.count
            try:
                with torch.no_grad(), recorder:
                    out = model(*call_inputs)
            except Exception as exc:  # noqa: BLE001
                return "solution_error", f"case {name} trial {t}: {type(exc).__name__}: {exc}"[:1500]
            finally:
                counter.recorder = None
            if counter.count == before:
                return "no_kernel_launch", f"case {name}: forward launched no Triton kernel"
            if recorder.compute_ops:
                return "torch_compute_in_forward", f"case {name}: aten ops {sorted(recorder.compute_ops)} in forward"
            golden = expected.get("golden")
            leaves = [x.detach() if isinstance(x, torch.Tensor) else x for x in flatten_outputs(out)]
            res = compare_case(leaves, expected["eager"][t], golden[t] if golden else None,
                               trial_inputs, task.comparator, task.tolerance,
                               task.metadata.get("comparator_args"), memo=memo)
            if not res.ok:
                return res.reason or "mismatch", f"case {name} trial {t}: {res.message}"[:1500]
    return None, ""


def _check_one(task_path: str, trials: int) -> TaskCheck:
    from amdkv.tasks.checks import check_reference
    from amdkv.tasks.loader import load_task

    t0, c0 = time.monotonic(), time.process_time()
    task = load_task(task_path, suite="procedural")
    res = TaskCheck(task.id, FAST, False, template=task.metadata.get("template", ""),
                    dtype=(task.dtypes or ("",))[0], split=task.split or "")
    ref = check_reference(task, trials=trials, workdir=_WORKER["workdir"], min_distinct=MIN_DISTINCT)
    if not ref.ok:
        res.stage, res.reason, res.message = "reference", ref.reason, ref.message
    else:
        solution = solution_file(task)
        if solution is None:
            res.stage, res.reason, res.message = "solution", "no_solution", "METADATA names no Triton solution file"
        else:
            reason, message = _run_solution(task, solution, ref.cases)
            res.ok, res.stage, res.reason, res.message = reason is None, "solution", reason, message
    res.seconds, res.cpu_seconds = time.monotonic() - t0, time.process_time() - c0
    return res


def _check_chunk(paths: list[str], trials: int) -> list[TaskCheck]:
    return [_check_one(p, trials) for p in paths]


# ------------------------------------------------------------------------------- parent side
def check_tasks(task_paths: Iterable[str | os.PathLike[str]], *, jobs: int = 2, trials: int = 3,
                on_result: Callable[[TaskCheck], None] | None = None) -> list[TaskCheck]:
    """The fast path over many task files, `jobs` worker processes; results in input order.

    A worker that dies (it should not: the solutions are tested code) fails only the tasks of its
    chunk, with reason `checker_process_died`; a fresh pool takes the rest."""
    import multiprocessing

    paths = [str(p) for p in task_paths]
    chunks = [paths[i:i + CHUNK] for i in range(0, len(paths), CHUNK)]
    results: dict[int, list[TaskCheck]] = {}
    ctx = multiprocessing.get_context("spawn")  # a clean interpreter: TRITON_INTERPRET is read at import

    def new_pool(workers: int) -> ProcessPoolExecutor:
        return ProcessPoolExecutor(max_workers=max(1, workers), mp_context=ctx, initializer=_worker_init)

    def done(i: int, checks: list[TaskCheck]) -> None:
        results[i] = checks
        for r in checks:
            if on_result:
                on_result(r)

    broken = []
    with new_pool(jobs) as pool:
        futures = {i: pool.submit(_check_chunk, chunk, trials) for i, chunk in enumerate(chunks)}
        for i, fut in futures.items():
            try:
                done(i, fut.result())
            except BrokenProcessPool:
                broken.append(i)
    # A worker died: every unfinished chunk failed with it. Re-run them one at a time to find the
    # chunk(s) that kill a worker on their own; the others get their real results.
    pool = None
    for i in broken:
        pool = pool or new_pool(1)
        try:
            done(i, pool.submit(_check_chunk, chunks[i], trials).result())
        except BrokenProcessPool:
            done(i, [TaskCheck(Path(p).stem, FAST, False, "checker", "checker_process_died",
                               "the fast-check worker process died while checking this task's chunk")
                     for p in chunks[i]])
            pool.shutdown()
            pool = None
    if pool is not None:
        pool.shutdown()
    return [r for i in range(len(chunks)) for r in results[i]]


def _stratum(item: Any, by: str, with_split: bool) -> tuple[str, ...]:
    """(template or core, dtype[, split]) of a Task or of a sampler.TaskSpec (no need to load it)."""
    if isinstance(item, Task):
        template, dtype, split = item.metadata.get("template", ""), (item.dtypes or ("",))[0], item.split or ""
        core = item.metadata.get("composition", " | ").split(" | ")[1].split("+")[0]
    else:
        template, core, dtype, split = item.composition.template, item.composition.core, item.dtype, item.split
    return ((template if by == "template" else core), dtype) + ((split,) if with_split else ())


def _strata(items: list[Any], by: str, with_split: bool = False) -> dict[tuple[str, ...], list[Any]]:
    """Tasks (or TaskSpecs) grouped by (template or core) x dtype (x split), each group in suite order."""
    if by not in ("template", "core"):
        raise ValueError(f"stratify by 'template' or 'core', not {by!r}")
    groups: dict[tuple[str, ...], list[Any]] = collections.defaultdict(list)
    for item in items:
        groups[_stratum(item, by, with_split)].append(item)
    return dict(sorted(groups.items()))


def stratified_sample(tasks: list[Any], per_stratum: int = 1, by: str = "template") -> list[Any]:
    """The first `per_stratum` tasks (Tasks or TaskSpecs, in suite order) of every (template or
    core) x dtype stratum."""
    return [t for group in _strata(tasks, by).values() for t in group[:per_stratum]]


def balanced_sample(tasks: list[Any], n: int, by: str = "core") -> list[Any]:
    """`n` tasks taken round-robin over the (core or template) x dtype x split strata, each in suite
    order: every stratum is represented (held-out ones too), and none crowds out the others."""
    groups = [list(g) for g in _strata(tasks, by, with_split=True).values()]
    out: list[Any] = []
    while len(out) < n and any(groups):
        for g in groups:
            if g and len(out) < n:
                out.append(g.pop(0))
    return out


def verify_sample(tasks: list[Task], *, device: str = "cpu", jobs: int = 2, language: str = "triton",
                  on_result: Callable[[TaskCheck], None] | None = None, **verifier_kw: Any) -> list[TaskCheck]:
    """The verifier (every check on) on each task's templated solution in `language`."""
    from amdkv.verify.scheduler import open_verifier

    pairs = [(t, solution_file(t, language)) for t in tasks]
    missing = [t.id for t, s in pairs if s is None]
    if missing:
        raise ValueError(f"no {language} solution for {missing[:5]}")

    def convert(task: Task, verdict: Any) -> TaskCheck:
        return TaskCheck(task.id, VERIFIER, verdict.status == "ok", verdict.status, verdict.reason,
                         verdict.diagnostics[-1500:] if verdict.status != "ok" else "",
                         task.metadata.get("template", ""), (task.dtypes or ("",))[0], task.split or "",
                         verdict.platform, verdict.timings.get("total_s", 0.0))

    def tick(task: Task, cand: str, verdict: Any) -> None:
        if on_result:
            on_result(convert(task, verdict))

    with open_verifier(device, jobs=jobs, **verifier_kw) as verifier:
        verdicts = verifier.verify_many(pairs, on_result=tick)
    return [convert(t, v) for (t, _), v in zip(pairs, verdicts)]


@dataclasses.dataclass
class SuiteCheck:
    """Everything `amdkv tasks check` reports: each task's results on both paths, and the times."""

    spec: str
    results: list[TaskCheck]
    fast_wall_s: float
    verifier_wall_s: float
    trials: int
    jobs: int

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec, "trials": self.trials, "jobs": self.jobs, "fast_wall_s": round(self.fast_wall_s, 2),
                "verifier_wall_s": round(self.verifier_wall_s, 2), "summary": summarise(self.results),
                "results": [r.to_dict() for r in self.results]}


def check_suite(spec: str, *, jobs: int = 2, trials: int = 1, per_stratum: int = 1, device: str = "cpu",
                progress: bool = False) -> SuiteCheck:
    """Every task of a procedural spec on the fast path, then `per_stratum` tasks of each
    template x dtype through the verifier on `device` (tqdm bars on stderr with `progress`)."""
    import sys

    from tqdm import tqdm

    from amdkv.tasks.loader import load_task
    from amdkv.tasks.procedural import suite_paths, suite_specs, task_file

    paths = suite_paths(spec)
    t0 = time.monotonic()
    with tqdm(total=len(paths), desc="fast checks", unit="task", disable=not progress, file=sys.stderr) as bar:
        results = check_tasks(paths, jobs=jobs, trials=trials, on_result=lambda r: bar.update(1))
    fast_s = time.monotonic() - t0
    t0 = time.monotonic()
    if per_stratum:
        picked = stratified_sample(suite_specs(spec), per_stratum)  # drawn, not loaded: only the sample is
        sample = [load_task(task_file(s), suite="procedural") for s in picked]
        with tqdm(total=len(sample), desc="verifier sample", unit="task", disable=not progress, file=sys.stderr) as bar:
            results += verify_sample(sample, device=device, jobs=jobs, on_result=lambda r: bar.update(1))
    return SuiteCheck(spec, results, fast_s, time.monotonic() - t0, trials, jobs)


def summarise(results: list[TaskCheck]) -> dict[str, Any]:
    """Counts per path, per template x dtype, and per failure reason (machine-readable)."""
    out: dict[str, Any] = {}
    for path in (FAST, VERIFIER):
        rs = [r for r in results if r.path == path]
        if not rs:
            continue
        strata: dict[str, dict[str, int]] = collections.defaultdict(lambda: {"checked": 0, "ok": 0})
        for r in rs:
            strata[f"{r.template}/{r.dtype}"]["checked"] += 1
            strata[f"{r.template}/{r.dtype}"]["ok"] += int(r.ok)
        out[path] = {"platform": rs[0].platform, "checked": len(rs), "ok": sum(r.ok for r in rs),
                     "failed": collections.Counter(r.reason for r in rs if not r.ok),
                     "by_template_dtype": dict(sorted(strata.items())),
                     "seconds_total": round(sum(r.seconds for r in rs), 2),
                     "cpu_seconds_total": round(sum(r.cpu_seconds for r in rs), 2)}
    return out
