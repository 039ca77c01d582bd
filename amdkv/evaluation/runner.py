"""`run_eval`: verify every sample of a samples file, resumably, and write the reports.

OUT/
  samples/<task_id>/<i>.py   each sample's source, as verified
  results.jsonl              one line per verified sample (fsynced; see results.py)
  metrics.json               amdkv.metrics.compute_metrics + suite, platform, env, settings
  report.md, report.html     human reports (reports_md.py, reports_html.py)
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import re
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from amdkv.errors import BadInputError
from amdkv.evaluation.benchmarks import benchmark_of, benchmark_report
from amdkv.evaluation.model_index import model_index
from amdkv.evaluation.results import RESULTS_SCHEMA_VERSION, ResultsFile, fingerprint, record_key
from amdkv.evaluation.samples import TaskSamples, check_k, parse_samples_file, sample_hash
from amdkv.signals import cancel_on_stop
from amdkv.tasks.types import Task

METRICS_FILE = "metrics.json"
RESULTS_FILE = "results.jsonl"
BENCHMARK_RESULTS_FILE = "results_benchmark.jsonl"   # the `benchmark` policy's verdicts (external suites)
MODEL_INDEX_FILE = "model_index.json"                # Hub model-card `model-index` eval results
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
SAMPLES_DIR = "samples"
DIAGNOSTIC_CHARS = 600   # example diagnostics in metrics.json / reports are cut to this


@dataclasses.dataclass
class EvalSettings:
    """One `amdkv eval` run. The verifier's settings are `config` (a VerifierConfig; default
    `VerifierConfig.from_env()` with `device`, `jobs`, `trials` and `timeout` applied on top), or
    the service at `verifier_url` (`amdkv serve`), whose own settings then apply."""

    suite: str
    samples: str
    out: str
    ks: tuple[int, ...] = (1,)
    ps: tuple[float, ...] = (1.0,)
    device: str = "auto"
    jobs: int = 1
    trials: int = 3
    timeout: float | None = None
    allow_partial: bool = False
    bootstrap: int = 1000
    seed: int = 0
    config: Any = None                 # amdkv.config.VerifierConfig | None
    verifier_url: str | None = None    # an `amdkv serve` service instead of local verification
    verifier_token: str | None = None
    ray_address: str | None = None     # a Ray cluster (auto | local | HOST:PORT): one verification actor per node
    policy: str = "strict"             # strict | reference (docs/benchmarks.md: reference-as-candidate runs)
    benchmark_verdicts: bool | None = None  # also verify under the benchmark's own rule (None: for external suites)
    model_name: str | None = None      # names the model in model_index.json (default: the samples file's stem)
    deadline: float | None = None      # time.monotonic(): samples not started by then end infra_error (re-run retries)
    stop: threading.Event | None = None  # once set (amdkv eval on SIGTERM/SIGINT): the verifier is cancelled, what
    #                                      was not finished ends infra_error / verifier_closed (a re-run verifies it)

    def verifier_config(self, policy: str | None = None) -> Any:
        from amdkv.config import resolve_config

        return resolve_config(self.config, device=self.device, jobs=self.jobs, trials=self.trials,
                              timeout=self.timeout, policy=policy or self.policy)


@dataclasses.dataclass
class EvalOutcome:
    metrics: dict[str, Any]
    out_dir: Path
    verified: int            # samples verified by this call
    reused: int              # samples taken from an earlier results.jsonl
    infra_errors: int        # samples whose verdict is infra_error after this call
    files: dict[str, str]


@dataclasses.dataclass(frozen=True)
class _Job:
    task: Task
    entry: TaskSamples
    index: int               # position in the task's samples list (file name, resume key)
    source: str
    sha: str
    path: Path

    @property
    def key(self) -> tuple[str, int]:
        return record_key(self.task.id, self.index)


def parse_int_list(text: str, name: str = "--k") -> tuple[int, ...]:
    try:
        vals = tuple(sorted({int(x) for x in str(text).split(",") if x.strip()}))
    except ValueError:
        raise BadInputError(f"{name} {text!r} is not a comma-separated list of integers",
                            hint=f"e.g. {name} 1,3") from None
    if not vals or any(v < 1 for v in vals):
        raise BadInputError(f"{name} {text!r}: every k must be an integer >= 1", hint=f"e.g. {name} 1,3")
    return vals


def parse_float_list(text: str, name: str = "--p") -> tuple[float, ...]:
    try:
        vals = tuple(sorted({float(x) for x in str(text).split(",") if x.strip()}))
    except ValueError:
        raise BadInputError(f"{name} {text!r} is not a comma-separated list of numbers",
                            hint=f"e.g. {name} 1.0,1.5") from None
    if not vals or any(not (v >= 0) or v == float("inf") for v in vals):
        raise BadInputError(f"{name} {text!r}: every p must be a finite number >= 0", hint=f"e.g. {name} 1.0")
    return vals


_SAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def _safe_name(task_id: str) -> str:
    """A folder name for a task id (ids are file stems, but folders of user tasks may be odd)."""
    name = _SAFE.sub("_", task_id).lstrip(".") or "task"
    if name != task_id:
        name += "-" + hashlib.sha256(task_id.encode()).hexdigest()[:8]
    return name


def _write_if_changed(path: Path, text: str) -> None:
    if path.is_file():
        try:
            if path.read_text(encoding="utf-8") == text:
                return
        except (OSError, UnicodeDecodeError):  # unreadable old copy: rewrite it
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _task_meta(task: Task) -> dict[str, Any]:
    """What the metrics and reports need about a task (stored in every results line)."""
    return {"id": task.id, "suite": task.suite, "split": task.split, "level": task.level,
            "op_family": task.op_family, "dtypes": list(task.dtypes), "source_hash": task.source_hash}


def _truncate(text: str | None, n: int = DIAGNOSTIC_CHARS) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else text[: n // 3] + "\n[...]\n" + text[-(2 * n) // 3:]


class _EvalVerifier:
    """Where this run's verdicts come from, decided once: the platform (detected once, or read from
    the service), the settings that fingerprint a verdict, and the verifier itself, opened only if
    something needs verifying (a fully resumed run starts no worker)."""

    def __init__(self, settings: EvalSettings, policy: str | None = None) -> None:
        self.settings = settings
        self._remote = None       # a service or a Ray cluster: opened now, its platform is the run's
        if settings.verifier_url:
            from amdkv.serve.client import RemoteVerifier

            self._remote = RemoteVerifier(settings.verifier_url, token=settings.verifier_token)
        elif settings.ray_address:
            from amdkv.cluster import open_run_verifier

            self._remote = open_run_verifier(settings.verifier_config(policy), ray_address=settings.ray_address)
        if self._remote is not None:
            self.config = self._remote.config
            self.platform = self._remote.platform
        else:
            from amdkv.verify.platform import detect_platform

            self.config = settings.verifier_config(policy)
            self.platform = detect_platform(self.config.device)

    @property
    def policy(self) -> str:
        return getattr(self.config, "policy", "strict")

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()

    def open(self) -> Any:
        if self._remote is not None:
            return self._remote
        from amdkv.cluster import open_run_verifier

        return open_run_verifier(self.config, platform=self.platform)


def platform_description(platform: str, device: str | None) -> str:
    """How every report names its platform (cuda numbers are never labelled AMD)."""
    if platform == "cpu":
        return "cpu — Triton CPU interpreter (interpreter-verified; correctness only, no timings)"
    if platform == "cuda":
        return f"cuda — NVIDIA GPU {device or ''}".rstrip() + " (not an AMD GPU; speedups are NVIDIA numbers)"
    if platform == "rocm":
        return f"rocm — AMD GPU {device or ''}".rstrip()
    return platform


def run_eval(settings: EvalSettings, *, progress: bool = True,
             log: Callable[[str], None] | None = None) -> EvalOutcome:
    """Verify the samples (resuming from OUT/results.jsonl) and write metrics and reports."""
    from amdkv.tasks.suites import load_suite, suite_version

    log = log or (lambda msg: print(msg, file=sys.stderr))
    ks, ps = tuple(settings.ks), tuple(settings.ps)
    if not ks or any(int(k) < 1 for k in ks):
        raise BadInputError(f"--k {ks}: every k must be >= 1", hint="e.g. --k 1,3")
    if settings.jobs < 1 or settings.trials < 1:
        raise BadInputError("--jobs and --trials must be >= 1", hint="e.g. --jobs 2 --trials 3")
    if settings.policy not in ("strict", "reference"):
        raise BadInputError(f"--policy {settings.policy!r}: amdkv eval runs `strict` or `reference`",
                            hint="the benchmark's own rule runs as the second pass of external suites "
                                 "(docs/benchmarks.md); it is never the headline verdict")

    # 1. everything the user gave is checked before anything runs
    suite_tasks = load_suite(settings.suite)
    by_id = {t.id: t for t in suite_tasks}
    entries = parse_samples_file(settings.samples, by_id)
    short = check_k(entries, ks)
    if short and not settings.allow_partial:
        listed = ", ".join(f"{tid} (n={n})" for tid, n in short[:20]) + (" ..." if len(short) > 20 else "")
        raise BadInputError(
            f"--k {max(ks)} needs at least {max(ks)} independent sample(s) per task, but {len(short)} task(s) "
            f"have fewer: {listed}",
            hint="give more samples, lower --k, or pass --allow-partial to report those pass@k as not reportable")
    source = _EvalVerifier(settings)
    platform = source.platform

    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs: list[_Job] = []
    for e in entries:
        task = by_id[e.task_id]
        for i, src in enumerate(e.samples):
            path = out / SAMPLES_DIR / _safe_name(task.id) / f"{i}.py"
            jobs.append(_Job(task, e, i, src, sample_hash(src), path))
    for j in jobs:
        _write_if_changed(j.path, j.source)

    # 2 + 3. verify what an earlier run did not (amdkv's policy), then, for an external benchmark,
    # the same samples under the benchmark's own rule (a second results file)
    done, reused, verified = _verification_pass(jobs, out / RESULTS_FILE, source, settings, log, progress)
    info = benchmark_of(suite_tasks)
    bench_done: dict[tuple[str, int], dict[str, Any]] | None = None
    bench_note = None
    want_bench = settings.benchmark_verdicts if settings.benchmark_verdicts is not None else info is not None
    if settings.stop is not None and settings.stop.is_set():
        want_bench = False  # stopped by a signal: score what is finished; a re-run does the second pass
    if want_bench and settings.verifier_url:
        bench_note = ("the verification service judges with its own policy; the benchmark's own verdicts need "
                      "local verification (run without verifier_url)")
    elif want_bench:
        bench_done, _, bench_verified = _verification_pass(jobs, out / BENCHMARK_RESULTS_FILE,
                                                           _EvalVerifier(settings, policy="benchmark"), settings,
                                                           log, progress)
        verified += bench_verified

    # 4. score and report
    ordered = _ordered(jobs, done, out)
    metrics = build_metrics(ordered, settings=settings, platform=platform.name,
                            suite_tasks=suite_tasks, suite_version=suite_version(suite_tasks),
                            entries=entries)
    if info is not None:
        metrics["benchmark"] = benchmark_report(
            info, [j.task for j in jobs] or suite_tasks, ordered,
            _ordered(jobs, bench_done, out) if bench_done is not None else None, policy=settings.policy,
            ks=settings.ks, ps=settings.ps, bootstrap=settings.bootstrap, seed=settings.seed, note=bench_note)
    files = {"metrics": str(out / METRICS_FILE), "results": str(out / RESULTS_FILE),
             "report_md": str(out / REPORT_MD), "report_html": str(out / REPORT_HTML),
             "samples": str(out / SAMPLES_DIR)}
    if bench_done is not None:
        files["results_benchmark"] = str(out / BENCHMARK_RESULTS_FILE)
    index = model_index(metrics, settings.model_name or Path(settings.samples).stem)
    if index is not None:
        write_json_atomic(out / MODEL_INDEX_FILE, index)
        files["model_index"] = str(out / MODEL_INDEX_FILE)
    write_json_atomic(out / METRICS_FILE, metrics)
    from amdkv.evaluation.report_html import render_html
    from amdkv.evaluation.report_md import render_markdown

    _write_if_changed(out / REPORT_MD, render_markdown(metrics))
    _write_if_changed(out / REPORT_HTML, render_html(metrics, ordered))
    infra = sum(1 for r in ordered if r["verdict"].get("status") == "infra_error")
    return EvalOutcome(metrics, out, verified=verified, reused=reused, infra_errors=infra, files=files)


def _ordered(jobs: list[_Job], done: dict[tuple[str, int], dict[str, Any]], out: Path) -> list[dict[str, Any]]:
    """Records in samples-file order; run/turn from the samples file as it is now (a reused verdict
    may have been recorded under another layout of turns: those are not part of what was verified)."""
    return [dict(done[j.key], run_index=j.entry.run_indices[j.index], turn=j.entry.turn_of(j.index),
                 sample_path=str(j.path.relative_to(out))) for j in jobs]


def _verification_pass(jobs: list[_Job], results_path: Path, source: _EvalVerifier, settings: EvalSettings,
                       log: Callable[[str], None], progress: bool) -> tuple[dict[tuple[str, int], dict[str, Any]], int, int]:
    """Reuse what `results_path` already holds for these samples, verify the rest with `source`;
    returns (record per sample, reused, verified)."""
    store = ResultsFile(results_path)
    old = store.load()
    if store.dropped_tail:
        log(f"note: cut an interrupted last line ({len(store.dropped_tail)} bytes) off {store.path}")
    done: dict[tuple[str, int], dict[str, Any]] = {}
    todo: list[_Job] = []
    for j in jobs:
        rec = old.get(j.key)
        if rec is not None and rec.get("fingerprint") == _fingerprint(j, source) \
                and rec["verdict"].get("status") != "infra_error":
            done[j.key] = rec
        else:
            todo.append(j)
    reused = len(done)
    if todo:
        _verify_jobs(todo, done, store, settings, source, total=len(jobs), progress=progress)
    else:
        source.close()  # a fully resumed pass: nothing was opened, or a service client was never used
    return done, reused, len(todo)


def _fingerprint(j: _Job, source: _EvalVerifier) -> dict[str, Any]:
    return fingerprint(sample_sha=j.sha, task_source_hash=j.task.source_hash, platform=source.platform.name,
                       trials=source.config.trials, policy=source.policy)


def _verify_jobs(todo: list[_Job], done: dict[tuple[str, int], dict[str, Any]], store: ResultsFile,
                 settings: EvalSettings, source: _EvalVerifier, *, total: int, progress: bool) -> None:
    from tqdm import tqdm

    platform = source.platform
    by_path = {str(j.path): j for j in todo}
    lock = threading.Lock()
    counts = Counter()
    for rec in done.values():
        _count(counts, rec["verdict"])
    desc = f"eval on {platform.name}" + ("" if source.policy == "strict" else f" ({source.policy} policy)")
    bar = tqdm(total=total, initial=total - len(todo), desc=desc, unit="sample",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    bar.set_postfix(_postfix(counts))

    def on_result(task: Task, cand: str, verdict: Any) -> None:
        j = by_path[cand]
        vd = verdict.to_dict()
        rec = {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "task_id": task.id, "sample_index": j.index, "run_index": j.entry.run_indices[j.index],
            "turn": j.entry.turn_of(j.index), "sample_sha": j.sha,
            "sample_path": str(j.path.relative_to(Path(settings.out))),
            "fingerprint": _fingerprint(j, source),
            "task": _task_meta(task), "verdict": vd,
            "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        store.append(rec)
        with lock:
            done[j.key] = rec
            _count(counts, vd)
            bar.set_postfix(_postfix(counts), refresh=False)
            bar.update(1)

    try:
        # One Verifier, a scheduler over every visible GPU (one per GPU, health-checked), or a service.
        with store, source.open() as verifier, cancel_on_stop(settings.stop, verifier):
            verifier.verify_many([(j.task, str(j.path)) for j in todo], on_result=on_result,
                                 deadline=settings.deadline)
    finally:
        bar.close()


def _count(counts: Counter, verdict: dict[str, Any]) -> None:
    counts["n"] += 1
    counts["pass"] += verdict.get("status") == "ok" and verdict.get("correct") is True
    counts["compiled"] += verdict.get("compiled") is True or (verdict.get("compiled") is None
                                                              and verdict.get("status") == "ok")
    counts["infra"] += verdict.get("status") == "infra_error"


def _postfix(counts: Counter) -> dict[str, Any]:
    post = {"pass": f"{counts['pass']}/{counts['n']}", "compiled": f"{counts['compiled']}/{counts['n']}"}
    if counts["infra"]:
        post["infra"] = counts["infra"]
    return post


# ---------------------------------------------------------------------------------- metrics
def build_metrics(records: Sequence[dict[str, Any]], *, settings: EvalSettings, platform: str,
                  suite_tasks: Sequence[Task], suite_version: str,
                  entries: Sequence[TaskSamples]) -> dict[str, Any]:
    """metrics.json: compute_metrics over the records plus what the reports need."""
    from amdkv.env import collect_env
    from amdkv.metrics import compute_metrics, from_verdict_dict

    results = [from_verdict_dict(r["task"], r["verdict"], sample_index=r["run_index"], turn=r["turn"])
               for r in records]
    metrics = compute_metrics(results, ks=settings.ks, ps=settings.ps, bootstrap=settings.bootstrap,
                              seed=settings.seed)
    device = next((r["verdict"].get("device") for r in records if r["verdict"].get("device")), None)
    status_counts = Counter(r["verdict"].get("status") for r in records)
    given = {e.task_id for e in entries}
    missing = sorted(t.id for t in suite_tasks if t.id not in given)
    env = dict(collect_env(with_gpu=platform != "cpu"))
    metrics.update({
        "suite": settings.suite,
        "suite_version": suite_version,
        "n_suite_tasks": len(suite_tasks),
        "tasks_without_samples": missing,
        "platform": platform,
        "platform_description": platform_description(platform, device),
        "device": device,
        "interpreter_verified": platform == "cpu",
        "is_amd": platform == "rocm",
        "env": env,
        "status_counts": dict(sorted(status_counts.items())),
        "failures": failures_by_status(records),
        "tasks": per_task_summary(records),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    })
    metrics["settings"].update({
        "suite": settings.suite, "samples_file": str(Path(settings.samples).resolve()),
        "samples_sha256": _file_sha(settings.samples), "device": settings.device, "jobs": settings.jobs,
        "trials": settings.trials, "timeout": settings.timeout, "allow_partial": settings.allow_partial,
        "verifier_url": settings.verifier_url, "ray_address": settings.ray_address, "policy": settings.policy,
    })
    return metrics


def _file_sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def failures_by_status(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{status: {reason: {count, example: {task_id, sample_index, diagnostic}}}} for non-ok samples."""
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        v = r["verdict"]
        status = v.get("status")
        if status == "ok":
            continue
        reason = v.get("reason") or "unspecified"
        slot = out.setdefault(status, {}).setdefault(reason, {"count": 0, "example": None})
        slot["count"] += 1
        if slot["example"] is None:
            slot["example"] = {"task_id": r["task_id"], "sample_index": r["sample_index"],
                               "sample_path": r.get("sample_path"),
                               "diagnostic": _truncate(v.get("diagnostics"))}
    return {s: dict(sorted(rs.items(), key=lambda kv: -kv[1]["count"])) for s, rs in sorted(out.items())}


def per_task_summary(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        v, t = r["verdict"], r["task"]
        row = out.setdefault(r["task_id"], {"level": t.get("level"), "op_family": t.get("op_family"),
                                            "dtypes": t.get("dtypes"), "n_samples": 0, "n_correct": 0,
                                            "n_compiled": 0, "statuses": {}})
        row["n_samples"] += 1
        row["n_correct"] += bool(v.get("status") == "ok" and v.get("correct") is True)
        row["n_compiled"] += bool(v.get("compiled") is True or (v.get("compiled") is None and v.get("status") == "ok"))
        row["statuses"][v.get("status")] = row["statuses"].get(v.get("status"), 0) + 1
    return dict(sorted(out.items()))
