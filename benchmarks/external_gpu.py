"""One GPU call: each external benchmark's reference solutions scored as candidates by amdkv and by the
benchmark's own harness, on the same candidates, timed side by side (docs/benchmarks.md).

    python3 benchmarks/external_gpu.py --out OUT --kernelbench .ext/KernelBench --geak-eval .ext/GEAK-eval \\
        [--tritonbench .ext/TritonBench] [--harness-site /tmp/site] [--device auto] [--jobs 8] \\
        [--budgets kb=90,kb_harness=60,tbg=150,tbg_harness=75,rocm=45,rocm_harness=45]

Phases, one after another (so their timings do not disturb each other), each with a budget after which
nothing new starts (what did not start is listed as "not run (budget)"; with `--harness-deadline`, a harness
job still running at that time is stopped and listed "not run (deadline)", to run again in a later call):

1. `kb`: `amdkv eval kernelbench:KB/KernelBench/level1` over the 100 problems' references as candidates,
   `reference` policy (they are plain PyTorch), torch.compile baseline off, smallest inputs first,
   `--kb-trials` (1) seeded trials, `--kb-jobs` (4) at once: time and candidates/min. Level 1's inputs
   total 340 GB over the 100 problems (one call each; 60 above 1 GB, up to 17 GB), and amdkv's verifier
   writes each trial's inputs and float64 goldens to its reference cache: all 100 do not fit one
   8-minute call (nor 64 GB of disk); the budget cuts the largest, and the table says where.
2. `kb_harness`: KernelBench's own `kernelbench.eval.eval_kernel_against_ref` on the same candidates, as its
   `scripts/eval_from_generations.py` runs it on one GPU: one fresh process per candidate, one at a time,
   5 correctness trials, 100 performance trials: candidates/min in the same call.
3. `tbg`: `amdkv eval tritonbench-g:<GEAK-eval's revised copy>` (or `--tbg-source thunlp`), strict policy.
4. `tbg_harness`: GEAK-eval's `TestAllCloseEvaluatorTBG` (run the file; then its perf file's check_close)
   on the same reference kernels, `--harness-workers` at once.
5. `rocm` / 6. `rocm_harness`: the same for `rocmbench:` and GEAK-eval's `TestAllCloseEvaluatorROCm`
   (pytest on the reference and the candidate file, then its .pt comparison).

What the harnesses need (the GPU machine has torch, triton, pytest, numpy, pandas, requests, tqdm):
wheels `loguru parse-llm-code pydantic pydantic-core annotated-types typing-inspection typing-extensions
python-dotenv`, installed with `--target` into a folder passed as `--harness-site` (used only by the
harness processes). KernelBench's package imports two LLM clients at import (`openai`, `litellm`) that
evaluation never calls and that are not installed there: the script gives the harness processes
stand-in modules of those names that raise if called (a boundary: LLM providers cannot be reached).
GEAK-eval's TritonBench-G exec check times every input size with `triton.testing.do_bench` (100 ms
warm-up, 1 s of repetitions, twice per size): with `--fast-harness-timing` (default on) the harness
processes get a `do_bench` that calls the op once, which leaves its call/exec verdicts unchanged (they
come from check_close and exceptions) and makes its speedups meaningless (not reported).

Output in OUT (at most 8 files): external_gpu.json (everything), external_gpu.md (the tables for docs/),
{kb,tbg,rocm}_metrics.json (the amdkv eval reports), harness.jsonl (every harness result, raw).
`--rerender OUT/external_gpu.json --out DIR` recomputes a finished run's comparisons with the current
rules (no GPU needed). A suite longer than one call runs over N calls with `--shard 0/N` ... `--shard N-1/N`
(every N-th task of the suite's fixed order), and `--rerender A/external_gpu.json B/external_gpu.json --out DIR`
merges them into one report; with `--later-replaces`, a task re-run in a later call (`--task ID`) keeps that
call's row.
On `--device cpu` (the CI test) the amdkv phases run under the Triton interpreter and a harness whose
code is missing from the checkout is reported as unavailable.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_files import write_report  # noqa: E402

from amdkv.env import describe_library  # noqa: E402
from amdkv.process import kill_group  # noqa: E402
from amdkv.verify.api import NOT_STARTED_BEFORE_DEADLINE  # noqa: E402

# KernelBench level 1's references total hundreds of GB: past this size, entries no verification holds
# are evicted, oldest first (one candidate per task: none is read again), so a long phase does not fill
# the GPU machine's 64 GiB disk (until session 20 only entries unused for 2 x --timeout + 60 s went,
# none within a 4-minute shard, and 17 of 25 problems met a full disk)
REFERENCE_CACHE_GIB = 16.0
# KernelBench problems with more input than this are verified one at a time (amdkv_phase): one in flight
# holds its inputs, eager outputs, float64 golden and the candidate's outputs on disk, about 5x its
# inputs for an elementwise problem (~40 GB for 38_L1Norm_'s 8.6 GB); two problems of 4 GiB fit a 64-GB disk.
KB_SOLO_ABOVE_BYTES = 4 * 2**30
DEFAULT_BUDGETS = {"kb": 90.0, "kb_harness": 60.0, "tbg": 150.0, "tbg_harness": 75.0, "rocm": 45.0,
                   "rocm_harness": 45.0}

# Stand-ins for the LLM clients KernelBench's package imports at import time (never called by eval).
LLM_SHIMS = {
    "litellm.py": '"""Stand-in: LLM providers are out of reach here; evaluation never calls this."""\n\n'
                  "def completion(*args, **kwargs):\n    raise RuntimeError('litellm stand-in: no LLM calls here')\n",
    "openai.py": '"""Stand-in: LLM providers are out of reach here; evaluation never calls this."""\n\n'
                 "class OpenAI:\n    def __init__(self, *args, **kwargs):\n"
                 "        raise RuntimeError('openai stand-in: no LLM calls here')\n",
}
# GEAK-eval's TritonBench-G harness processes only (--fast-harness-timing): do_bench calls the op once.
# It then runs the machine's own sitecustomize, if there is one, so nothing else changes.
TIMING_SHIM = {"sitecustomize.py": textwrap.dedent('''\
    """Harness processes only: triton.testing.do_bench calls the op once (verdicts unchanged, timings
    meaningless); then the next sitecustomize on sys.path runs as it would have."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    try:
        import triton.testing as _tt

        def _once(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **kw):
            fn()
            return [1.0] * len(quantiles) if quantiles else 1.0

        _tt.do_bench = _once
    except ImportError:
        pass
    _here = os.path.dirname(os.path.abspath(__file__))
    _spec = importlib.machinery.PathFinder.find_spec(
        "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
    if _spec is not None:
        _module = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_module)
    ''')}

KB_DRIVER = textwrap.dedent("""\
    import json, sys, time, traceback
    t0 = time.time()
    try:
        import torch
        from kernelbench.eval import eval_kernel_against_ref
        ref, cand = open(sys.argv[1]).read(), open(sys.argv[2]).read()
        r = eval_kernel_against_ref(ref, cand, seed_num=42, num_correct_trials=5, num_perf_trials=100,
                                    measure_performance=True, backend="cuda", device=torch.device("cuda:0"))
        out = {"ok": r is not None, "compiled": bool(r and r.compiled), "correct": bool(r and r.correctness),
               "runtime_us": getattr(r, "runtime", None), "ref_runtime_us": getattr(r, "ref_runtime", None),
               "detail": str(getattr(r, "metadata", ""))[-1500:]}
    except BaseException as exc:
        out = {"ok": False, "compiled": False, "correct": False, "detail": traceback.format_exc()[-1500:]}
    out["seconds"] = time.time() - t0
    print("HARNESS_RESULT " + json.dumps(out, default=str))
""")

GEAK_DRIVER = textwrap.dedent("""\
    import json, os, sys, time, traceback
    t0 = time.time()
    kind, code_file, fname, work = sys.argv[1:5]
    try:
        from geak_eval.evaluators.interface import get_evaluators
        evaluator = get_evaluators[kind]()
        code = open(code_file).read()
        log_root, exec_root = os.path.join(work, "log"), os.path.join(work, "exec")
        os.makedirs(log_root, exist_ok=True); os.makedirs(exec_root, exist_ok=True)
        res = evaluator(code, log_root, exec_root, fname, atol=1e-2, rtol=1e-1)   # as geak_eval/run.py calls it
        out = {"ok": True, "call": bool(res[0]), "exec": bool(res[1]), "speedup": res[2],
               "detail": str(res[-1])[-1500:], "stdout": str(res[-2])[-1500:]}
    except BaseException:
        out = {"ok": False, "call": False, "exec": False, "detail": traceback.format_exc()[-1500:]}
    out["seconds"] = time.time() - t0
    print("HARNESS_RESULT " + json.dumps(out, default=str))
""")


# ------------------------------------------------------------------------------------------ amdkv
def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` -> (I, N): this call takes every N-th task from the I-th (0-based) of the suite's fixed order."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise SystemExit(f"--shard {text!r}: expected I/N with 0 <= I < N (e.g. 0/2 and 1/2 for two calls)")
    return i, n


def shard_tasks(spec: str, shard: tuple[int, int], only: frozenset[str] = frozenset()) -> list[Any]:
    """The suite's tasks of one shard, in the fixed order every call uses: smallest inputs first
    (KernelBench's level 1 moves 8 MB to 17 GB per call, and a budget that ends the phase should cut
    the largest problems, not a random set; input_bytes: kernelbench loader), every N-th from the I-th;
    with `only` (`--task`), just those of them (one long task again, on a machine of its own)."""
    from amdkv.tasks.suites import load_suite

    tasks = sorted(load_suite(spec), key=lambda t: (t.metadata.get("input_bytes") or 0, t.id))[shard[0]::shard[1]]
    if not only:
        return tasks
    unknown = sorted(only - {t.id for t in tasks})
    if unknown:
        raise SystemExit(f"--task {', '.join(unknown)}: not a task of {spec} shard {shard[0]}/{shard[1]} "
                         "(`amdkv tasks list --from SPEC` lists the ids)")
    return [t for t in tasks if t.id in only]


class UnreadableReport(ValueError):
    """An earlier report an option names that cannot be used: its message says which file and why."""


def read_report(path: Path) -> dict[str, Any]:
    """An earlier external_gpu.json (one call's or a merge), parsed; UnreadableReport for a missing file, one
    that is not JSON, or JSON that is not such a report. Every reader of earlier reports goes through it."""
    try:
        report = json.loads(path.read_text())
    except OSError as exc:
        raise UnreadableReport(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except ValueError as exc:
        raise UnreadableReport(f"{path}: not JSON ({exc})") from exc
    if not isinstance(report, dict) or not isinstance(report.get("benchmarks"), dict):
        raise UnreadableReport(f"{path}: not an external_gpu.json report (no \"benchmarks\")")
    return report


def unreadable_reports(paths: Path | list[Path] | None) -> str:
    """Why some of the earlier reports an option names cannot be read (`read_report`'s reasons, every bad
    file at once), or "": checked before anything runs, so a typo costs no device time and no traceback
    (session 26: a --skip-done path that was not on the GPU machine ended a call in a FileNotFoundError).
    Each report is then parsed once more where it is used: a few MB at most, once per run."""
    problems = []
    for path in [paths] if isinstance(paths, Path) else paths or []:
        try:
            read_report(path)
        except UnreadableReport as exc:
            problems.append(str(exc))
    return "; ".join(problems) + ("; name the external_gpu.json of an earlier call or merge" if problems else "")


def report_side(report: Path, key: str, side: str = "amdkv") -> dict[str, Any] | None:
    """Benchmark `key`'s side ("amdkv" or "harness") in an earlier report (external_gpu.json, one call's or
    a merge), or None."""
    return (read_report(report)["benchmarks"].get(key) or {}).get(side)


def amdkv_from(previous: Path, key: str, spec: str, shard: tuple[int, int],
               only: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`--amdkv-from`: the amdkv side of `key` as finished calls measured it (an external_gpu.json, one
    call's or a merge), with the reference candidates rebuilt from the suite, so that this call runs
    only the harness side (a call whose harness phase was cut keeps its amdkv verdicts; device time is
    scarce). The same suite, and a row for every task of this call's shard (or `--task`s; one never
    started is compared with nothing), or nothing: a mismatch is an error, not a silent mix.

    A report of more tasks than this call's (a whole level merged from quarters and a call for what
    they left, session 24) gives only this call's rows (`carried_subset`): a harness call per quarter
    runs against the one merged report."""
    from amdkv.evaluation.reference_samples import reference_samples

    entry = report_side(previous, key)
    if not entry:
        raise SystemExit(f"--amdkv-from {previous}: no amdkv side of {key!r} in it")
    if entry.get("spec") != spec:
        raise SystemExit(f"--amdkv-from {previous}: its {key} side is {entry.get('spec')}, this call's is {spec}: "
                         "run with the same checkout paths")
    tasks = shard_tasks(spec, shard, only)
    rows = entry.get("tasks") or {}
    missing = sorted(t.id for t in tasks if t.id not in rows)
    if missing:
        raise SystemExit(f"--amdkv-from {previous}: {len(missing)} task(s) of {spec} shard {shard[0]}/{shard[1]} "
                         f"have no row there ({', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}): "
                         "run their amdkv side first, or pass the report of the same --shard")
    lines, _ = reference_samples(tasks)
    side = carried_subset(entry, {t.id for t in tasks}) if len(rows) > len(tasks) else entry
    return {**side, "from_call": str(previous), "reference_candidates": candidates_by_task(lines)}


def status_counts(rows: dict[str, dict[str, Any]]) -> dict[str, int]:
    """{status: how many} of verdict rows (a report's amdkv side, or the verdicts of a phase)."""
    return dict(collections.Counter(r.get("status") for r in rows.values()))


def carried_subset(entry: dict[str, Any], ids: set[str]) -> dict[str, Any]:
    """`entry` (an amdkv side) restricted to the tasks `ids`: their rows as they stand, counts from those
    rows; no seconds and no rate, which were the whole report's (its calls ran these tasks among others).
    A later `--rerender` with the whole report drops such a side as already there (merge_amdkv)."""
    rows = {t: r for t, r in entry["tasks"].items() if t in ids}
    return {**entry, "tasks": rows, "n_tasks": len(rows), "seconds": None, "per_minute": None, "load_s": None,
            "status_counts": status_counts(rows),
            "verified": sum(1 for r in rows.values() if r.get("reason") != NOT_STARTED_BEFORE_DEADLINE),
            "no_reference": [], "one_at_a_time": sorted(set(entry.get("one_at_a_time") or []) & ids),
            "subset_of": f"{len(entry['tasks'])} tasks of {entry.get('shard', '0/1')}"}


def not_done(previous: Path | list[Path] | None, key: str, spec: str, shard: tuple[int, int],
             only: frozenset[str], side: str = "amdkv", rerun: frozenset[str] = frozenset()) -> frozenset[str]:
    """`--skip-done`: the shard's tasks (or `only`'s) that none of the `previous` reports judged on this
    call's `side`. amdkv's: no row, a row never started before its budget, or an `infra_error` (the
    machine's failure: worth another run). The harness's (a harness-only call, `--amdkv-from`): no row,
    or a job never started before its budget (`not_run`); a job past the per-job limit ran, and runs the
    same again. Several reports: a call that goes on from a merge and the call after it, with no merge
    between the two calls (the GPU machine goes back 30 s after a call). An empty `only` means the whole
    shard; a shard with nothing left is an error, not a run of everything. `rerun` (`--rerun`): tasks
    run again although judged, after a fix (session 25: a verifier-side out-of-memory), beside the rest."""
    if not previous:
        return only
    reports = previous if isinstance(previous, list) else [previous]
    judged = {t for report in reports for t, r in ((report_side(report, key, side) or {}).get("tasks") or {}).items()
              if (not r.get("not_run") if side == "harness" else
                  r.get("status") != "infra_error" and r.get("reason") != NOT_STARTED_BEFORE_DEADLINE)}
    ids = {t.id for t in shard_tasks(spec, shard, only)}
    again = {t.id for t in shard_tasks(spec, shard, rerun)} if rerun else set()
    left = frozenset((ids - judged) | again)
    named = " ".join(map(str, reports))
    if not left:
        raise SystemExit(f"--skip-done {named}: every task of {spec} shard {shard[0]}/{shard[1]} is judged there "
                         f"({side} side); `--rerun ID` runs a judged one again")
    print(f"== {key}: {len(ids & judged)} task(s) judged in {named} ({side} side); {len(left)} to run"
          + (f", {len(again & judged)} of them again (--rerun)" if again else ""), flush=True)
    return left



def candidates_by_task(lines: list[dict[str, Any]]) -> dict[str, str]:
    """Each task's reference candidate, from `reference_samples`' samples-file lines."""
    return {x["task_id"]: x["samples"][0] for x in lines}


def amdkv_phase(name: str, spec: str, work: Path, *, policy: str, device: str, jobs: int, budget: float,
                timeout: float | None, trials: int = 3, reference_timeout: float | None = None,
                shard: tuple[int, int] = (0, 1), solo_above_bytes: int | None = None, only: frozenset[str] = frozenset(),
                keep: Path | None = None, solo_jobs: int = 1, cache_dir: Path | None = None) -> dict[str, Any]:
    """`amdkv eval SPEC` over the suite's reference solutions (the same code path as the CLI), its
    samples and references' cache under `work` (the cache is tens of GB for KernelBench) and each part's
    run folder under `keep` when given (below). With a
    `shard` (I, N), only every N-th task from the I-th: a suite longer than one device call (all 184
    TritonBench-G references on both sides take ~13 minutes) is run over N calls and merged with
    `--rerender A.json B.json`. Tasks whose inputs pass `solo_above_bytes` run one at a time, after
    the others, within the same budget: a verification in flight holds its reference's files (inputs,
    outputs, float64 goldens) and the candidate's outputs, ~40 GB for KernelBench's largest, and two
    of those do not fit a 64-GB disk (session 20).

    `keep` (the script's --out): each part's `amdkv eval` run folder (results.jsonl with every verdict's
    timings, the report) goes there instead of under `work`, so it comes back from the GPU machine as
    it is written. A phase cut by the step's limit (SIGINT: KeyboardInterrupt) returns what finished,
    marked `cut`: session 23's first KernelBench quarter verified 17 problems, ran past its step limit
    in the one-at-a-time part, and came back with no verdict at all.

    `solo_jobs` (--kb-solo-jobs): how many of the large problems run at once (1: one at a time). `cache_dir`
    (--cache-dir): where the references' cache goes, instead of under `work`; on another file system
    (the GPU machine's /dev/shm, a 128-GiB tmpfs) the references and the candidates' outputs are admitted
    against two disks' room, not one (disk admission keeps a ledger per file system)."""
    from amdkv.config import VerifierConfig
    from amdkv.evaluation import EvalSettings, run_eval
    from amdkv.evaluation.reference_samples import reference_samples
    from amdkv.evaluation.results import iter_records

    t_load = time.monotonic()
    tasks = shard_tasks(spec, shard, only)
    sizes = {t.id: t.metadata.get("input_bytes") for t in tasks}
    lines, missing = reference_samples(tasks)
    # (concurrency, samples): the tasks whose inputs pass `solo_above_bytes` run one at a time after the
    # others (in the fixed order, so the budget still cuts the largest last)
    alone = {x["task_id"] for x in lines
             if solo_above_bytes is not None and (sizes.get(x["task_id"]) or 0) > solo_above_bytes}
    solo = [x for x in lines if x["task_id"] in alone]
    groups = [(jobs, [x for x in lines if x["task_id"] not in alone]), (solo_jobs, solo)]
    run_dir = work / f"run_{name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    runs_dir = keep if keep is not None else run_dir
    prefix = f"{name}_" if keep is not None else ""
    load_s = time.monotonic() - t_load
    t0 = time.monotonic()
    cache = (cache_dir / f"cache_{name}_{os.getpid()}") if cache_dir is not None else run_dir / "cache"
    config = VerifierConfig.from_env(compile_baseline=False, verdict_cache=False, cache_dir=str(cache),
                                     reference_cache_gib=REFERENCE_CACHE_GIB, reference_timeout=reference_timeout)
    outcomes, records, cut = [], [], False
    try:
        for part, (at_once, part_lines) in enumerate(g for g in groups if g[1]):
            samples = run_dir / f"samples{part}.jsonl"
            samples.write_text("".join(json.dumps(x) + "\n" for x in part_lines))
            part_out = runs_dir / f"{prefix}run{part}"
            settings = EvalSettings(suite=spec, samples=str(samples), out=str(part_out), ks=(1,),
                                    device=device, jobs=at_once, trials=trials, timeout=timeout, policy=policy,
                                    benchmark_verdicts=False, deadline=t0 + budget, bootstrap=200, config=config)
            try:
                outcomes.append(run_eval(settings, progress=True))
            except KeyboardInterrupt:
                cut = True
            results = part_out / "results.jsonl"
            records += list(iter_records(results)) if results.exists() else []  # a line cut mid-write is dropped
            if cut:
                print(f"== {name}: cut by the step's limit during part {part}; {len(records)} verdicts kept",
                      flush=True)
                break
        elapsed = time.monotonic() - t0  # the cache's deletion below is not the benchmark's time
    finally:
        # each benchmark's references in a cache of its own, deleted after its phase: on 2026-12-02
        # KernelBench level 1's (GBs per problem) stayed on the 64 GiB disk and the TritonBench-G
        # phase after it failed in ways a full disk explains (docs/gpu.md, Known gaps)
        shutil.rmtree(cache, ignore_errors=True)
    by_task = {r["task_id"]: r["verdict"] for r in records}
    started = [v for v in by_task.values() if v.get("reason") != NOT_STARTED_BEFORE_DEADLINE]
    counts = status_counts(by_task)
    first = outcomes[0].metrics if outcomes else {}
    return {"spec": spec, "policy": policy, "n_tasks": len(tasks), "load_s": round(load_s, 2),
            "seconds": round(elapsed, 2), "verified": len(started), "cut": cut,
            "per_minute": round(60 * len(started) / elapsed, 2) if elapsed else None,
            "platform": first.get("platform") or next((v.get("platform") for v in by_task.values()), None),
            "device": first.get("device") or next((v.get("device") for v in by_task.values()), None),
            "status_counts": counts, "no_reference": missing,
            "trials": trials, "shard": f"{shard[0]}/{shard[1]}",
            "one_at_a_time": sorted(x["task_id"] for x in solo), "solo_jobs": solo_jobs,
            "cache_dir": str(cache_dir) if cache_dir is not None else None,
            "tasks": {tid: {**_verdict_row(v), "input_bytes": sizes.get(tid)}
                                        for tid, v in by_task.items()},
            "reference_candidates": candidates_by_task(lines),
            "metrics": outcomes[0].metrics if len(outcomes) == 1 else {"parts": [o.metrics for o in outcomes]}}


def _verdict_row(v: dict[str, Any]) -> dict[str, Any]:
    """One task's verdict for the report: its first diagnostic line for the tables, and the end of the
    whole diagnostics as `detail` (a Triton CompilationError's first line is only "at 1:0:"; what
    failed comes after it: ROCmBench's moe_gemm on 2026-12-05 said nothing more in the report)."""
    text = (v.get("diagnostics") or "").strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return {"status": v.get("status"), "reason": v.get("reason"), "diagnostic": first[:400], "detail": text[-1500:],
            "seconds": (v.get("timings") or {}).get("total_s"), "speedup": v.get("speedup")}


# ---------------------------------------------------------------------------------------- harnesses
def write_shims(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def harness_env(site: str | None, pythonpath: list[str]) -> dict[str, str]:
    """The harness processes' environment: their code, stand-ins, and the carried wheels."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(pythonpath + ([site] if site else []))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_harness(name: str, jobs: list[dict[str, Any]], *, workers: int, budget: float, per_job_timeout: float,
                log: Any, deadline: float | None = None) -> dict[str, Any]:
    """Each job: {"task_id", "argv", "env", "cwd"}; one fresh process per job, `workers` at once.

    `budget`: no job starts after it (seconds from the phase's start). `deadline` (`--harness-deadline`):
    every job ends by then; one still running is stopped and recorded `not_run: "deadline"`, never a
    timeout, so a later call (`--skip-done`) runs it again. Why: with only the budget, a call had to keep a
    whole per-job limit in reserve after it (the level-1 plan's 320 s) for a job that mostly took a minute;
    with a deadline a job starts whenever time is left, and the time a stopped job took is the only loss.

    Each job's row goes to `log` as soon as it finishes, whatever the others do: rows written in job
    order waited for the slowest job ahead of them, and a call cut meanwhile lost every finished
    row (session 20: ROCmBench's 14 workers ran ~4 minutes and left 0 rows, a ~300-s test first in
    line). On the way out, by return or by SIGINT from the step's limit, every job process still
    running is killed with its process group: they run in sessions of their own (so a timeout kills
    the whole test), and the next call on the machine would otherwise share it with them."""
    t0 = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    live: set[subprocess.Popen] = set()
    lock = threading.Lock()
    stopping = threading.Event()

    def one(job: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        start = time.monotonic()
        with lock:  # (stopping is checked here: no job starts after the kill on the way out)
            if stopping.is_set() or start - t0 > budget or (deadline is not None and start - t0 >= deadline):
                return job["task_id"], {"ok": False, "not_run": "budget"}
            proc = subprocess.Popen(job["argv"], cwd=job["cwd"], env=job["env"], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
            live.add(proc)
        until_deadline = per_job_timeout if deadline is None else t0 + deadline - start
        try:
            stdout, stderr = proc.communicate(timeout=min(per_job_timeout, until_deadline))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            stdout, stderr = proc.communicate()
            wall = time.monotonic() - start
            if until_deadline < per_job_timeout:  # stopped by the deadline, not by the per-job limit
                return job["task_id"], {"ok": False, "not_run": "deadline", "wall_s": round(wall, 2)}
            return job["task_id"], {"ok": False, "timeout": per_job_timeout, "wall_s": round(wall, 2)}
        finally:
            with lock:
                live.discard(proc)
        line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("HARNESS_RESULT ")), None)
        res = json.loads(line.split(" ", 1)[1]) if line else {"ok": False, "detail": stderr[-1500:]}
        res["wall_s"] = round(time.monotonic() - start, 2)
        return job["task_id"], res

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        for done in concurrent.futures.as_completed([pool.submit(one, job) for job in jobs]):
            tid, res = done.result()
            results[tid] = res
            log.write(json.dumps({"harness": name, "task_id": tid, **res}, default=str) + "\n")
            log.flush()
    finally:
        stopping.set()
        pool.shutdown(wait=False, cancel_futures=True)
        with lock:
            for proc in live:
                kill_group(proc)
    elapsed = time.monotonic() - t0
    results = {job["task_id"]: results[job["task_id"]] for job in jobs}  # the jobs' order, for the report
    ran = [r for r in results.values() if not r.get("not_run")]
    return {"seconds": round(elapsed, 2), "ran": len(ran), "workers": workers,
            "per_minute": round(60 * len(ran) / elapsed, 2) if elapsed and ran else None, "tasks": results}


def candidate_jobs(candidates: dict[str, str], work: Path, prefix: str, env: dict[str, str], cwd: Path,
                   argv: Any) -> list[dict[str, Any]]:
    """One harness job per reference candidate (task id -> source): the candidate's file in a folder of
    its own, and `argv(task_id, candidate_file, folder)` to run."""
    jobs = []
    for tid, cand in candidates.items():
        folder = work / f"{prefix}_{tid.replace('/', '_')}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "candidate.py").write_text(cand)
        jobs.append({"task_id": tid, "argv": argv(tid, folder / "candidate.py", folder), "env": env, "cwd": str(cwd)})
    return jobs


def kb_harness(kb_root: Path, candidates: dict[str, str], env: dict[str, str], work: Path, *, budget: float,
               log: Any, per_job_timeout: float = 180.0, deadline: float | None = None) -> dict[str, Any]:
    if not (kb_root / "src" / "kernelbench" / "eval.py").is_file():
        return {"unavailable": f"no src/kernelbench/eval.py under {kb_root}"}
    driver = work / "kb_driver.py"
    driver.write_text(KB_DRIVER)

    def argv(tid: str, cand: Path, folder: Path) -> list[str]:
        level, stem = tid.split("/", 1)
        return [sys.executable, str(driver), str(kb_root / "KernelBench" / level / f"{stem}.py"), str(cand)]

    jobs = candidate_jobs(candidates, work, "kb", env, work, argv)
    # KernelBench's eval_from_generations on one GPU: one candidate at a time, each in a fresh process. Not
    # two: one job of level 1's largest problems is estimated at ~50 GiB of GPU memory (8 GiB of inputs, two
    # 8-GiB outputs, torch.allclose's temporaries), so two at once would likely run an H100 out of memory
    return run_harness("kernelbench", jobs, workers=1, budget=budget, per_job_timeout=per_job_timeout, log=log,
                       deadline=deadline)


def geak_harness(kind: str, geak_root: Path, candidates: dict[str, str], env: dict[str, str], work: Path, *,
                 workers: int, budget: float, per_job_timeout: float, log: Any,
                 deadline: float | None = None) -> dict[str, Any]:
    if not (geak_root / "geak_eval" / "evaluators" / "interface.py").is_file():
        return {"unavailable": f"no geak_eval/evaluators/interface.py under {geak_root}"}
    driver = work / "geak_driver.py"
    driver.write_text(GEAK_DRIVER)
    jobs = candidate_jobs(candidates, work, kind, env, geak_root,
                          lambda tid, cand, folder: [sys.executable, str(driver), kind, str(cand), f"{tid}.py",
                                                     str(folder)])
    return run_harness(f"geak-{kind}", jobs, workers=workers, budget=budget, per_job_timeout=per_job_timeout,
                       log=log, deadline=deadline)


# ----------------------------------------------------------------------------------------- comparing
def harness_pass(kind: str, res: dict[str, Any]) -> bool | None:
    """The harness's verdict, or None where it gave none: not run (budget) or stopped by this
    script's per-job limit (`--harness-timeout`, shorter than the harnesses' own: GEAK-eval allows
    2 to 40 minutes), which is our budget, not the harness failing the candidate."""
    if res.get("not_run") or res.get("timeout"):
        return None
    return bool(res.get("correct")) if kind == "kb" else bool(res.get("exec"))


# What a harness printed when it failed a candidate for a reason of its own, not the candidate's
# (found on the H200 on 2026-12-04, GEAK-eval at the commit the report names): pattern -> why.
HARNESS_DEFECTS = (
    ("'tuple' object has no attribute 'clone'",
     "harness defect: GEAK-eval's exec check calls input_tensor.clone() on the perf file's inputs, which are a "
     "tuple for most TritonBench-G ops, so it fails whatever the candidate"),
    ("IndentationError",
     "harness defect: GEAK-eval's code processing (process_code) broke the candidate's indentation before "
     "running it"),
    *((pattern, "the outputs differed from the benchmark's reference at rtol=atol=1e-3 in GEAK-eval's perf check "
                "(whose message then fails with a NameError)")
      # the NameError's text before Python 3.11, and after (the H100 image's Python 3.12, 2026-12-05)
      for pattern in ("name 'e' is not defined", "cannot access local variable 'e'")),
    # "Error: at L:C:" is how Triton's CompilationError begins: the candidate compiled and ran on the
    # benchmark's own test inputs (amdkv ran it), so what failed is the perf file's inputs
    ("Failed to run benchmark for input tensor. Error: at ",
     "harness defect: GEAK-eval's perf file calls the kernel with inputs of its own, unlike the benchmark's "
     "test, for which Triton refuses to compile it (fused_activation: fp16 into tl.sigmoid, which takes "
     "fp32/fp64; the test uses fp32), so it fails whatever the candidate"),
    # KernelBench (H100, 2026-12-06): its eval casts every input tensor to the run's precision
    # (_process_input_tensor: input.to(dtype=precision)), class-index targets included
    ("\"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'",
     "harness defect: KernelBench's eval casts every input tensor to the run's precision (fp32), the "
     "integer class targets of cross_entropy included, so PyTorch's own loss refuses them whatever the "
     "candidate"),
)


def harness_why(res: dict[str, Any]) -> str:
    """The known harness-side cause of a harness failure, from what it printed ('' when none is known)."""
    text = f"{res.get('stdout') or ''}\n{res.get('detail') or ''}"
    return next((why for pattern, why in HARNESS_DEFECTS if pattern in text), "")


PYTEST_ERROR = re.compile(r"^E\s+([\w.]*(?:Error|Exception))\b", re.MULTILINE)


def harness_pass_caveat(res: dict[str, Any]) -> str:
    """What a harness *pass* hides, from what it printed: GEAK-eval's ROCm check passed moe_gemm on the
    H100 of 2026-12-05 with `E   torch.OutOfMemoryError` in its own test output ('' when nothing shows)."""
    found = PYTEST_ERROR.search(f"{res.get('stdout') or ''}\n{res.get('detail') or ''}")
    return f"passed although its own test output shows {found.group(1)}" if found else ""


def compare(kind: str, amdkv: dict[str, Any], harness: dict[str, Any]) -> dict[str, Any]:
    """Agreement of amdkv's verdicts with the harness's on the same candidates, and every
    disagreement with both sides' reasons. A task the harness gave no verdict on (not run, or stopped
    by this script's per-job limit: `harness_timeout`) or amdkv did not judge is not compared."""
    from amdkv.evaluation.benchmarks import EXPLANATIONS

    counts = {"both_pass": 0, "both_fail": 0, "harness_only": 0, "amdkv_only": 0, "not_compared": 0,
              "harness_timeout": 0}
    rows = []
    for tid, ours in sorted(amdkv["tasks"].items()):
        res = (harness.get("tasks") or {}).get(tid, {"not_run": "harness unavailable"})
        theirs = harness_pass(kind, res)
        if ours["status"] == "infra_error" or ours["reason"] == NOT_STARTED_BEFORE_DEADLINE:
            counts["not_compared"] += 1
            continue
        if theirs is None:
            counts["harness_timeout" if res.get("timeout") else "not_compared"] += 1
            continue
        mine = ours["status"] == "ok"
        counts["both_pass" if mine and theirs else "both_fail" if not (mine or theirs)
               else "harness_only" if theirs else "amdkv_only"] += 1
        if mine != theirs:
            why = EXPLANATIONS.get(ours["reason"] or "", ours["reason"] or ours["status"])
            rows.append({"task_id": tid, "harness": "pass" if theirs else "fail", "amdkv": f"{ours['status']} "
                         f"{ours['reason'] or ''}".strip(),
                         "why": f"{why}: {ours['diagnostic']}"[:500] if not mine else "",
                         "harness_why": harness_why(res) if not theirs else harness_pass_caveat(res),
                         "harness_detail": (res.get("detail") or "")[-300:]})
    judged = counts["both_pass"] + counts["both_fail"] + counts["harness_only"] + counts["amdkv_only"]
    counts["agreement_rate"] = round((counts["both_pass"] + counts["both_fail"]) / judged, 4) if judged else None
    return {"counts": counts, "disagreements": rows}


def benchmark_entry(key: str, amdkv: dict[str, Any], harness: dict[str, Any]) -> dict[str, Any]:
    """One benchmark's section of the report: both sides, their comparison, the reference counts."""
    passes = [t for t, r in (harness.get("tasks") or {}).items() if harness_pass(key, r)]
    judged = [t for t, r in (harness.get("tasks") or {}).items() if harness_pass(key, r) is not None]
    return {"amdkv": amdkv, "harness": harness, "comparison": compare(key, amdkv, harness),
            "harness_judged": len(judged), "ref_passes": len(passes),
            "ref_passes_ok": sum(1 for t in passes if amdkv["tasks"].get(t, {}).get("status") == "ok"),
            "ref_passes_not_ok": {t: amdkv["tasks"].get(t) for t in passes
                                  if amdkv["tasks"].get(t, {}).get("status") != "ok"}}


def judged_first(candidates: dict[str, str], verdicts: dict[str, dict[str, Any]],
                 judged_only: bool = False) -> dict[str, str]:
    """The harness phase's order: first the tasks amdkv judged, then those its budget left unstarted.
    A harness phase cut by its budget then still covers the tasks both sides can be compared on (in
    session 13 both phases ran in the suite's order and only their common prefix was comparable).

    `judged_only` (--harness-judged-only): the unjudged are left out, so a run that times both sides over
    the same candidates spends no harness time on tasks amdkv's budget left unstarted (session 27's plan
    step 4: the two phases' times are then over one set of candidates)."""
    def unjudged(tid: str) -> bool:
        v = verdicts.get(tid) or {}
        return v.get("status") == "infra_error" or v.get("reason") == NOT_STARTED_BEFORE_DEADLINE
    ordered = sorted(candidates.items(), key=lambda item: unjudged(item[0]))
    return {tid: src for tid, src in ordered if not (judged_only and unjudged(tid))}


def slowest_tasks(amdkv: dict[str, Any], n: int = 8) -> str:
    """The phase's slowest verifications, one line: what to look at when a phase overruns its budget."""
    timed = sorted(((r.get("seconds") or 0.0, t) for t, r in amdkv["tasks"].items() if r.get("seconds")), reverse=True)
    return "slowest: " + ", ".join(f"{t} {sec:.0f} s ({amdkv['tasks'][t]['status']})" for sec, t in timed[:n])


# -------------------------------------------------------------------------------------------- report
def markdown(report: dict[str, Any]) -> str:
    out = [f"# External benchmarks on {report['device']} (platform {report['platform']})", "",
           f"amdkv {describe_library(report['env'])}, torch {report['env'].get('torch')}, "
           f"triton {report['env'].get('triton')}; {report['created']}. Platform `cuda` numbers are NVIDIA numbers, "
           "not AMD ones.", ""]
    for key, title in (("kb", "KernelBench level 1"), ("tbg", "TritonBench-G"), ("rocm", "ROCmBench")):
        b = report["benchmarks"].get(key)
        if not b:
            continue
        a, h, c = b["amdkv"], b["harness"], b["comparison"]
        done = [r for r in a["tasks"].values() if r["reason"] != NOT_STARTED_BEFORE_DEADLINE]
        biggest = max((r.get("input_bytes") or 0 for r in done), default=0)
        out += [f"## {title}", "",
                f"- suite `{a['spec']}`, {a['n_tasks']} tasks"
                + (f" (calls' shards {a['shard']})" if a.get("shard", "0/1") != "0/1" else "") + f", policy `{a['policy']}`, {a['trials']} seeded trial(s)"
                + (f"; smallest inputs first, the largest verified {biggest / 1e9:.2f} GB per call" if biggest else ""),
                f"- **amdkv**: {a['verified']} verified in {a['seconds']} s ({a['per_minute']} candidates/min); "
                "statuses " + ", ".join(f"{k} {v}" for k, v in (a["status_counts"] or {}).items())
                + (f" (**from an earlier call**, {a['from_call']}: the two sides' times are not of one call)"
                   if a.get("from_call") else "")
                + (f" (this call's tasks of a report of {a['subset_of']}: its times are the whole report's, "
                   "not given here)" if a.get("subset_of") else "")
                + (f"; {len(a['one_at_a_time'])} with the largest inputs "
                   + ("one at a time" if (a.get("solo_jobs") or 1) == 1 else f"{a['solo_jobs']} at a time")
                   + ", after the others" if a.get("one_at_a_time") else ""),
                "- **the benchmark's harness**: " + (h.get("unavailable") or (
                    f"{h['ran']} run before the call was cut (rebuilt from harness.jsonl; no phase time)"
                    if h.get("rebuilt_from") else
                    f"{h['ran']} run in {h['seconds']} s ({h['per_minute']} candidates/min, {h['workers']} at once)")),
                f"- **reference passes its own test** (harness): {b['ref_passes']} of {b['harness_judged']}; of those "
                f"`ok` under amdkv: {b['ref_passes_ok']}", "",
                "| | count |", "|---|---|"] + [f"| {k} | {v} |" for k, v in c["counts"].items()] + [""]
        if c["disagreements"]:
            out += ["| task | harness | amdkv | amdkv's reason (when it fails) | the harness's (known causes) |",
                    "|---|---|---|---|---|"]
            out += [f"| {d['task_id']} | {d['harness']} | {d['amdkv']} | {d['why'].replace('|', '/')} | "
                    f"{d.get('harness_why', '').replace('|', '/')} |" for d in c["disagreements"]] + [""]
        unv = {t: r for t, r in a["tasks"].items() if r["status"] == "unverifiable"}
        if unv:
            out += [f"Tasks amdkv cannot judge on {report['platform']} ({len(unv)}):", ""]
            out += [f"- `{t}`: {r['reason']}: {r['diagnostic']}" for t, r in sorted(unv.items())] + [""]
    return "\n".join(out) + "\n"


# harness.jsonl's "harness" field -> the benchmark key of the report
HARNESS_KEYS = {"kernelbench": "kb", "geak-tbg": "tbg", "geak-rocm": "rocm"}


def harness_from_log(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """A harness phase rebuilt from its harness.jsonl rows (written one by one as jobs finish), for a
    phase the call's limit cut before the report was rewritten; None when the log has none of it."""
    tasks = {r["task_id"]: {k: v for k, v in r.items() if k not in ("harness", "task_id")}
             for r in rows if HARNESS_KEYS.get(r.get("harness", "")) == key}
    if not tasks:
        return None
    ran = [r for r in tasks.values() if not r.get("not_run")]
    return {"seconds": None, "ran": len(ran), "workers": None, "per_minute": None, "tasks": tasks,
            "rebuilt_from": "harness.jsonl (the phase was cut before the report was rewritten)"}


def load_run(report_json: Path) -> dict[str, Any]:
    """A finished run's report, each harness phase the call's limit cut (the report says "not
    finished") rebuilt from the harness.jsonl beside the JSON, which has every job that finished."""
    report = read_report(report_json)
    log = report_json.with_name("harness.jsonl")
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []
    for key, b in report["benchmarks"].items():
        if "tasks" not in b["harness"]:
            b["harness"] = harness_from_log(rows, key) or b["harness"]
    return report


def _summed(parts: list[dict[str, Any]], field: str) -> float | None:
    values = [p.get(field) for p in parts]
    return None if any(v is None for v in values) else round(sum(values), 2)


def merge_amdkv(parts: list[dict[str, Any]], later_replaces: bool = False) -> dict[str, Any]:
    """One benchmark's amdkv side over several calls (shards): tasks united, times and counts summed,
    the rate recomputed from the sums. A side carried whole by more than one call (two harness-only
    calls, `--amdkv-from` the same amdkv call, the second with `--task` for what the first's budget
    cut) counts once; any other task in two calls is a mistake in the shards: refused, unless
    `later_replaces` (a task run again after a fix, `--task ID`): then the last call's row stands, the
    counts are those of the rows that stand, and the times stay the calls' sum (every run's cost).

    A side a harness-only call carried (`from_call`: `--amdkv-from`, whole or `carried_subset`) is a copy and
    is left out where its rows are already there: beside a run of amdkv's own that has all its tasks (that
    run's rows stand: session 25's harness calls carried the merge from before a problem's re-run, whose old
    row would otherwise come back, and its times twice), or beside another part holding the same rows (the
    larger report a subset was carried from)."""
    distinct: list[dict[str, Any]] = []
    for part in parts:
        if not any(part["tasks"] == seen["tasks"] for seen in distinct):
            distinct.append(part)
    own = {t for p in distinct if not p.get("from_call") for t in p["tasks"]}

    def a_copy(p: dict[str, Any]) -> bool:
        return bool(p.get("from_call")) and (set(p["tasks"]) <= own or any(
            q is not p and all(q["tasks"].get(t) == r for t, r in p["tasks"].items()) for q in distinct))
    parts = [p for p in distinct if not a_copy(p)]
    tasks: dict[str, Any] = {}
    for part in parts:
        twice = sorted(set(tasks) & set(part["tasks"]))
        if twice and not later_replaces:
            raise SystemExit(f"--rerender: task(s) {', '.join(twice[:5])} are in more than one run; merge only "
                             "runs of different --shard values, or add --later-replaces when a later run is a "
                             "re-run of those tasks whose rows should stand")
        tasks.update(part["tasks"])
    if later_replaces:
        counts = status_counts(tasks)
        verified = len(tasks)
        no_reference = {t for p in parts for t in p.get("no_reference") or []} - set(tasks)
        n_tasks = len(tasks) + len(no_reference)
    else:
        counts = dict(sum((collections.Counter(p.get("status_counts") or {}) for p in parts), collections.Counter()))
        verified, n_tasks = sum(p["verified"] for p in parts), sum(p["n_tasks"] for p in parts)
    seconds = _summed(parts, "seconds")
    return {**parts[0], "tasks": tasks, "status_counts": counts, "seconds": seconds, "verified": verified,
            "n_tasks": n_tasks, "load_s": _summed(parts, "load_s"),
            "per_minute": round(60 * verified / seconds, 2) if seconds else None,
            "no_reference": sorted({t for p in parts for t in p.get("no_reference") or []}),
            "one_at_a_time": sorted({t for p in parts for t in p.get("one_at_a_time") or []}),
            # each shard once: calls that split one shard by --task (session 23's quarter 0) merge back to it,
            # so the merged report serves `--amdkv-from` with that --shard
            "shard": "+".join(dict.fromkeys(str(p.get("shard", "0/1")) for p in parts))}


def merge_harness(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One benchmark's harness side over several calls: tasks united; seconds and rate only when every
    call's phase finished (a rebuilt phase has no time)."""
    ran_parts = [p for p in parts if "tasks" in p]
    if not ran_parts:
        return parts[0]
    tasks: dict[str, Any] = {}
    for part in ran_parts:  # a later call's row stands, except a job it never started ("not_run")
        tasks.update({t: r for t, r in part["tasks"].items() if t not in tasks or "not_run" not in r})
    ran = sum(p["ran"] for p in ran_parts)
    seconds = _summed(ran_parts, "seconds") if len(ran_parts) == len(parts) else None
    at_once = list(dict.fromkeys(p.get("workers") for p in ran_parts))  # calls may differ (--harness-workers)
    merged = {**ran_parts[0], "tasks": tasks, "ran": ran, "seconds": seconds,
              "workers": at_once[0] if len(at_once) == 1 else " or ".join(map(str, at_once)) + " (by call)",
              "per_minute": round(60 * ran / seconds, 2) if seconds else None}
    if len(ran_parts) < len(parts):
        merged["rebuilt_from"] = f"{len(parts) - len(ran_parts)} of {len(parts)} calls had no harness result"
    return merged


def rerender(report_jsons: Path | list[Path], out: Path, later_replaces: bool = False) -> str:
    """Recompute the comparisons of finished runs (their external_gpu.json) with the rules as they are
    now, and write the report to `out`: device time is scarce, the rules of comparison change (a
    harness timeout stopped counting as a harness failure on 2026-12-04), the runs' verdicts do not.
    Several runs (calls of different `--shard`) are merged into one report, benchmark by benchmark."""
    paths = [report_jsons] if isinstance(report_jsons, Path) else list(report_jsons)
    runs = [load_run(p) for p in paths]
    report = runs[0]
    keys = [k for run in runs for k in run["benchmarks"]]
    for key in dict.fromkeys(keys):
        sections = [run["benchmarks"][key] for run in runs if key in run["benchmarks"]]
        amdkv = merge_amdkv([b["amdkv"] for b in sections], later_replaces)
        harness = merge_harness([b["harness"] for b in sections])
        report["benchmarks"][key] = benchmark_entry(key, amdkv, harness)
    report["rerendered"] = {"from": [str(p) for p in paths], "at": time.strftime("%Y-%m-%d %H:%M:%S"),
                            "later_replaces": later_replaces}
    out.mkdir(parents=True, exist_ok=True)
    return write_report(out, "external_gpu", report, markdown)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rerender", type=Path, nargs="+", default=None, metavar="EXTERNAL_GPU_JSON",
                    help="no run: recompute finished runs' comparisons and tables into --out (several: the "
                         "calls of different --shard values, merged)")
    ap.add_argument("--later-replaces", action="store_true",
                    help="with --rerender: a task in several runs keeps the last run's row (a re-run after a fix, "
                         "`--task ID`), instead of being refused; times stay every run's sum")
    ap.add_argument("--amdkv-from", type=Path, default=None, metavar="EXTERNAL_GPU_JSON",
                    help="take amdkv's side of each benchmark from a finished call's external_gpu.json (same "
                         "checkout paths and --shard) and run only the harnesses: for a call whose harness phase "
                         "was cut. The report then says the two sides' times come from different calls")
    ap.add_argument("--shard", default="0/1", metavar="I/N",
                    help="only every N-th task of each suite from the I-th (0-based), in the suite's fixed order: "
                         "run a suite over N calls, then merge them with --rerender")
    ap.add_argument("--kernelbench", type=Path, help="KernelBench checkout (KernelBench/level1, src/kernelbench)")
    ap.add_argument("--geak-eval", type=Path, help="GEAK-eval checkout (ROCm set, revised TritonBench-G, harness)")
    ap.add_argument("--tritonbench", type=Path, help="thunlp/TritonBench checkout (instructions; --tbg-source thunlp)")
    ap.add_argument("--tbg-source", choices=("geak", "thunlp"), default="geak")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", type=int, default=8, help="amdkv: candidates verified at once")
    ap.add_argument("--harness-workers", type=int, default=8, help="GEAK-eval harness processes at once")
    ap.add_argument("--kb-harness-timeout", type=float, default=180.0,
                    help="seconds per KernelBench harness job (default 180). Its eval draws a problem's inputs "
                         "about seven times: level 1's 16-GiB 45_Average_Pooling_2D, ~240 s (estimated: 33 s a draw "
                         "on the H100 machine's host, session 25)")
    ap.add_argument("--harness-site", default=None, help="folder with the harness's wheels installed (--target)")
    ap.add_argument("--timeout", type=float, default=120.0, help="amdkv: seconds per candidate process")
    ap.add_argument("--reference-timeout", type=float, default=None,
                    help="amdkv: seconds a task's reference worker may run (AMDKV_REFERENCE_TIMEOUT; unset: "
                         "--timeout, at least 300): the budget stops starting tasks, this bounds a running one")
    ap.add_argument("--harness-timeout", type=float, default=300.0,
                    help="GEAK-eval harness: seconds per task process (a budget stops starting tasks; this bounds "
                         "the ones already running, so a phase ends by budget + this)")
    ap.add_argument("--budgets", default="", help="phase=seconds,... (defaults: %s)" % DEFAULT_BUDGETS)
    ap.add_argument("--harness-deadline", type=float, default=None, metavar="SECONDS",
                    help="every harness phase's jobs end by this many seconds after the phase began: a job still "
                         "running then is stopped and listed \"not run (deadline)\", so --skip-done runs it again "
                         "(default: none; the budget stops new jobs and the per-job limits bound running ones)")
    ap.add_argument("--harness-judged-only", action="store_true",
                    help="the harness runs only the candidates amdkv judged in this call (not those its budget left "
                         "unstarted), so both sides' times are over the same candidates")
    ap.add_argument("--only", default="kb,tbg,rocm", help="benchmarks to run, in this order: kb,tbg,rocm")
    ap.add_argument("--task", action="append", default=[],
                    help="only this task id (repeatable), of the --shard's tasks: a long one again on its own")
    ap.add_argument("--levels", default="1", help="KernelBench levels (the issue asks for level 1)")
    ap.add_argument("--kb-trials", type=int, default=1,
                    help="amdkv's seeded trials for KernelBench (its inputs reach 17 GB per call; each trial's "
                         "inputs and float64 goldens go to the reference cache)")
    ap.add_argument("--trials", type=int, default=3,
                    help="amdkv's seeded trials for TritonBench-G and ROCmBench (fewer for one long test alone in a "
                         "call: ROCmBench's rmsnorm_fwd runs ~84 s per run, and a trial is two runs on each side)")
    ap.add_argument("--kb-jobs", type=int, default=4, help="amdkv: KernelBench candidates at once (host memory)")
    ap.add_argument("--kb-solo-jobs", type=int, default=1,
                    help="amdkv: KernelBench's problems over 4 GiB of input at once (1: one at a time; each writes "
                         "24-56 GiB, so more than 1 needs --cache-dir on another file system)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="amdkv: the references' cache folder (default: under this run's temp folder); on another "
                         "file system than the temp folder (/dev/shm on the GPU machine) the references and the "
                         "candidates' outputs each have a disk's room; deleted after each benchmark")
    ap.add_argument("--skip-done", type=Path, nargs="+", default=None, metavar="EXTERNAL_GPU_JSON",
                    help="leave out the tasks these earlier reports (a call's, or --rerender's merge) already "
                         "judged, so a shard cut short goes on where it stopped: amdkv's side (not-started and "
                         "infra_error rows run again: merge a run that re-ran some with --rerender ... "
                         "--later-replaces), or with --amdkv-from the harness's side (jobs not started run again)")
    ap.add_argument("--rerun", action="append", default=[], metavar="TASK_ID",
                    help="with --skip-done: run this task's amdkv side again although a report judged it (after a "
                         "fix); merge with --rerender ... --later-replaces, whose later row then stands")
    ap.add_argument("--fast-harness-timing", action=argparse.BooleanOptionalAction, default=True)
    args = ap.parse_args(argv)
    if args.rerun and not args.skip_done:
        ap.error("--rerun goes with --skip-done (the reports that judged the task); alone, --task runs a task")
    for option, paths in (("--rerender", args.rerender), ("--amdkv-from", args.amdkv_from),
                          ("--skip-done", args.skip_done)):
        bad = unreadable_reports(paths)
        if bad:
            ap.error(f"{option}: {bad}")
    if args.rerender:
        print(rerender(args.rerender, Path(args.out), args.later_replaces))
        return 0
    shard = parse_shard(args.shard)
    only_tasks = frozenset(args.task)
    budgets = dict(DEFAULT_BUDGETS)
    for item in filter(None, args.budgets.split(",")):
        k, _, v = item.partition("=")
        budgets[k.strip()] = float(v)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # The harness processes run in a scratch folder: relative checkout paths would point nowhere
    # there (the H200 run of 2026-12-01 lost every harness verdict to "No module named geak_eval").
    for name in ("kernelbench", "geak_eval", "tritonbench"):
        if getattr(args, name) is not None:
            setattr(args, name, getattr(args, name).resolve())
    if args.harness_site:
        args.harness_site = str(Path(args.harness_site).resolve())
    work = Path(tempfile.mkdtemp(prefix="external-gpu-"))
    llm_shims = write_shims(work / "shims_llm", LLM_SHIMS)
    timing_shims = write_shims(work / "shims_timing", TIMING_SHIM)
    only = set(args.only.split(","))
    from amdkv.env import collect_env

    env_facts = dict(collect_env(with_gpu=args.device != "cpu"))
    report: dict[str, Any] = {"created": time.strftime("%Y-%m-%d %H:%M:%S"), "env": env_facts, "budgets": budgets,
                              "args": {k: str(v) for k, v in vars(args).items()}, "benchmarks": {},
                              "platform": None, "device": None}
    log = open(out / "harness.jsonl", "w")
    plan = []
    if "kb" in only and args.kernelbench:
        plan.append(("kb", f"kernelbench:{args.kernelbench}?levels={args.levels}", "reference", args.kernelbench))
    if "tbg" in only and (args.geak_eval or args.tritonbench):
        root = args.geak_eval if args.tbg_source == "geak" and args.geak_eval else args.tritonbench
        index = (f"?index={args.tritonbench / 'data' / 'TritonBench_G_v1.json'}"
                 if args.tritonbench and root == args.geak_eval else "")
        plan.append(("tbg", f"tritonbench-g:{root}{index}", "strict", args.geak_eval))
    if "rocm" in only and args.geak_eval:
        plan.append(("rocm", f"rocmbench:{args.geak_eval}", "strict", args.geak_eval))
    # in the order --only names them: a call that may be cut runs first what matters most to it
    order = [k for k in args.only.split(",") if k]
    plan.sort(key=lambda entry: order.index(entry[0]))
    for key, spec, policy, harness_root in plan:
        if args.amdkv_from:
            print(f"== {key}: amdkv's side from {args.amdkv_from} ({spec}, shard {shard[0]}/{shard[1]})", flush=True)
            amdkv = amdkv_from(args.amdkv_from, key, spec, shard,
                               not_done(args.skip_done, key, spec, shard, only_tasks, side="harness"))
        else:
            print(f"== {key}: amdkv ({spec}, policy {policy})", flush=True)
            amdkv = amdkv_phase(key, spec, work, policy=policy, device=args.device,
                                jobs=args.kb_jobs if key == "kb" else args.jobs, budget=budgets[key],
                                timeout=args.timeout, trials=args.kb_trials if key == "kb" else args.trials,
                                reference_timeout=args.reference_timeout, shard=shard,
                                solo_above_bytes=KB_SOLO_ABOVE_BYTES if key == "kb" else None,
                                only=not_done(args.skip_done, key, spec, shard, only_tasks,
                                              rerun=frozenset(args.rerun)),
                                keep=out, solo_jobs=args.kb_solo_jobs, cache_dir=args.cache_dir)
            (out / f"{key}_metrics.json").write_text(json.dumps(amdkv.pop("metrics"), indent=1, default=str))
        report["platform"], report["device"] = amdkv["platform"], amdkv["device"]
        print(slowest_tasks(amdkv), flush=True)
        # amdkv's verdicts (with each task's seconds) are kept even if the call ends in the harness phase
        # (both H200 calls of 2026-12-02 did, after one reference ran for minutes past the budget)
        candidates = judged_first(amdkv.pop("reference_candidates"), amdkv["tasks"],
                                  judged_only=args.harness_judged_only)
        report["benchmarks"][key] = benchmark_entry(key, amdkv, {"unavailable": "not finished: the run ended "
                                                                               "during this phase"})
        write_report(out, "external_gpu", report, markdown)
        if amdkv.get("cut"):  # the step's limit came: what finished is written, nothing more starts
            log.close()
            return 130
        print(f"== {key}: the benchmark's own harness", flush=True)
        if key == "kb":
            henv = harness_env(args.harness_site, [str(Path(harness_root) / "src"), str(llm_shims)])
            harness = kb_harness(Path(harness_root), candidates, henv, work, budget=budgets["kb_harness"], log=log,
                                 per_job_timeout=args.kb_harness_timeout, deadline=args.harness_deadline)
        else:
            fast = key == "tbg" and args.fast_harness_timing  # ROCm's correctness run never times
            henv = harness_env(args.harness_site, [str(harness_root)] + ([str(timing_shims)] if fast else [])) \
                if harness_root else {}
            harness = geak_harness(key, Path(harness_root or "."),
                                   candidates, henv, work, workers=args.harness_workers,
                                   budget=budgets[f"{key}_harness"], per_job_timeout=args.harness_timeout,
                                   log=log, deadline=args.harness_deadline)
        report["benchmarks"][key] = benchmark_entry(key, amdkv, harness)
        # after every benchmark, not only at the end: a device call cut during the next benchmark
        # (session 12's was, in the ROCm harness phase) keeps the tables of those that finished
        write_report(out, "external_gpu", report, markdown)
        log.flush()
    log.close()
    print(write_report(out, "external_gpu", report, markdown))
    return 0



if __name__ == "__main__":
    sys.exit(main())
