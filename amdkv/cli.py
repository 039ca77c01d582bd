"""The `amdkv` command line: one subcommand per stage.

Exit codes (DESIGN.md section 8): 0 done, 1 failures found, 2 bad input or usage, 3 infrastructure.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import click

from amdkv.cluster.options import check_one_verifier_source, ray_option
from amdkv.errors import EXIT_BAD_INPUT, EXIT_FAILURES, EXIT_INFRA, EXIT_OK, AmdkvError
from amdkv.serve.protocol import TOKEN_ENV


class _Group(click.Group):
    """Maps AmdkvError to its exit code with a one-screen message instead of a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AmdkvError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group)
@click.version_option(package_name="amdkv")
def main() -> None:
    """amdkv: execution-verified GPU kernels for AMD Instinct GPUs."""


# ------------------------------------------------------------------------------------- verify
@main.command()
@click.argument("task_file", type=click.Path(dir_okay=False))
@click.argument("candidate_file", type=click.Path(dir_okay=False))
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]))
@click.option("--arch", "archs", multiple=True, help="also compile for these AMD targets (gfx90a, gfx942, gfx950)")
@click.option("--trials", default=3, show_default=True, help="seeded trials per correctness case")
@click.option("--timeout", type=float, default=None, help="seconds for the candidate's process")
@click.option("--verdict-cache/--no-verdict-cache", default=None,
              help="reuse the verdict of an identical earlier verification (default: on, or AMDKV_VERDICT_CACHE)")
@click.option("--json", "as_json", is_flag=True, help="print the verdict as JSON")
def verify(task_file: str, candidate_file: str, device: str, archs: tuple[str, ...], trials: int,
           timeout: float | None, verdict_cache: bool | None, as_json: bool) -> None:
    """Verify CANDIDATE_FILE (defines ModelNew) against TASK_FILE (defines Model)."""
    from amdkv.errors import BadInputError
    from amdkv.tasks.loader import load_task
    from amdkv.verify import Verifier
    from amdkv.verify.verifier import BAD_INPUT_REASONS

    task = load_task(_existing_task_file(task_file))
    # one candidate: no warm spare started ahead (spares=0)
    with Verifier(device, trials=trials, timeout=timeout, spares=0, archs=archs,
                  **_cache_setting(verdict_cache)) as verifier:
        verdict = verifier.verify(task, candidate_file)
    if verdict.reason in BAD_INPUT_REASONS:
        raise BadInputError(f"{candidate_file}: {verdict.diagnostics}",
                            hint="a candidate defines `class ModelNew(nn.Module)` whose forward takes the "
                                 "same arguments as the task's Model.forward")
    if as_json:
        click.echo(verdict.to_json(indent=2))
    else:
        from amdkv.reports.console import print_verdict

        print_verdict(verdict)
    if verdict.status == "infra_error":
        sys.exit(EXIT_INFRA)
    sys.exit(EXIT_OK if verdict.status == "ok" else EXIT_FAILURES)


def _existing_task_file(task_file: str) -> str:
    """TASK_FILE itself when it exists. `amdkv tasks list` shows ids, so a new user types
    `amdkv verify l1_relu ...`: say that TASK_FILE is a path and, for a bundled id, which path,
    instead of only "cannot read task file <cwd>/l1_relu"."""
    from pathlib import Path

    from amdkv.errors import BadInputError
    from amdkv.tasks import builtin

    if Path(task_file).exists():
        return task_file
    bundled = builtin.task_path(task_file.removeprefix("builtin:"))
    if bundled is not None:
        raise BadInputError(f"no task file {task_file!r}: TASK_FILE is a path, and {task_file!r} looks like the id "
                            f"of a bundled task", hint=f"pass its file: amdkv verify {bundled} CANDIDATE_FILE")
    raise BadInputError(f"no task file {task_file!r}",
                        hint="TASK_FILE is a task .py file (docs/task_format.md); `amdkv tasks list --json` "
                             "gives each bundled task's `path`")


def _cache_setting(verdict_cache: bool | None) -> dict[str, bool]:
    """--verdict-cache/--no-verdict-cache as a config override (absent: the environment's setting)."""
    return {} if verdict_cache is None else {"verdict_cache": verdict_cache}


# -------------------------------------------------------------------------------------- tasks
@main.group()
def tasks() -> None:
    """Inspect task suites."""


@tasks.command("list")
@click.option("--from", "spec", default="builtin:all", show_default=True,
              help="builtin:all, builtin:<suite>, builtin:train|eval, procedural:train|heldout?n=N&seed=S, "
                   "a folder or a task file")
@click.option("--suite", default=None)
@click.option("--split", type=click.Choice(["train", "eval", "heldout"]), default=None)
@click.option("--level", type=int, default=None)
@click.option("--op-family", default=None)
@click.option("--dtype", default=None)
@click.option("--json", "as_json", is_flag=True)
def tasks_list(spec: str, suite: str | None, split: str | None, level: int | None, op_family: str | None,
               dtype: str | None, as_json: bool) -> None:
    """List tasks with their metadata."""
    from amdkv.tasks.suites import filter_tasks, load_suite, suite_version

    all_tasks = load_suite(spec)
    chosen = filter_tasks(all_tasks, suite=suite, split=split, level=level, op_family=op_family, dtype=dtype)
    if as_json:
        click.echo(json.dumps({"suite_version": suite_version(all_tasks),
                               "tasks": [t.summary() for t in chosen]}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(chosen)} task(s) from {spec} (suite version {suite_version(all_tasks)})")
    for col in ("id", "suite", "split", "level", "op family", "dtypes", "cases"):
        table.add_column(col)
    for t in chosen:
        table.add_row(t.id, t.suite, t.split or "-", str(t.level or "-"), t.op_family, ",".join(t.dtypes),
                      " ".join(f"{c.name}[{'C' if c.is_correctness else ''}{'P' if c.is_performance else ''}]"
                               for c in t.cases))
    Console().print(table)


@tasks.command("reference-samples")
@click.argument("spec")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False), help="samples JSONL to write")
def tasks_reference_samples(spec: str, out_file: str) -> None:
    """Write a samples file whose one sample per task is the benchmark's own reference solution
    (for `amdkv eval SPEC --samples FILE`; KernelBench's need `--policy reference`)."""
    from amdkv.evaluation.reference_samples import write_reference_samples

    n, missing = write_reference_samples(spec, out_file)
    click.echo(f"wrote {n} reference sample(s) to {out_file}" + (f"; no reference for {missing}" if missing else ""))


@tasks.command("check")
@click.argument("spec")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(min=1), help="worker processes")
@click.option("--trials", default=1, show_default=True, type=click.IntRange(min=1),
              help="seeded trials per correctness case on the fast path (the verifier's seeds, from its first)")
@click.option("--verify-sample", "per_stratum", default=1, show_default=True, type=click.IntRange(min=0),
              help="also run the verifier on this many tasks per template x dtype (0: none)")
@click.option("--device", default="cpu", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]),
              help="platform of the verifier sample")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), default=None, help="write every result as JSON")
@click.option("--json", "as_json", is_flag=True)
def tasks_check(spec: str, jobs: int, trials: int, per_stratum: int, device: str, out_file: str | None,
                as_json: bool) -> None:
    """Check a procedural suite: every task on the fast path, a stratified sample with the verifier."""
    from amdkv.tasks.procedural import checks, parse

    parse(spec)  # a clear error before anything runs
    run = checks.check_suite(spec, jobs=jobs, trials=trials, per_stratum=per_stratum, device=device,
                             progress=not as_json)
    if out_file:
        with open(out_file, "w") as f:
            json.dump(run.to_dict(), f, indent=1)
    summary = checks.summarise(run.results)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        from amdkv.reports.task_checks import print_check_summary

        print_check_summary(summary)
    sys.exit(EXIT_OK if run.ok else EXIT_FAILURES)


@tasks.command("ingest")
@click.argument("source")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="folder for the task files")
@click.option("--corpus", default=None, help="name in task ids and provenance (default: kernelbook for KernelBook "
                                             "tables, else the source's name)")
@click.option("--allow-licence", "allowed", multiple=True,
              help="an allowed SPDX licence (repeatable; replaces the default permissive allow-list)")
@click.option("--licence", "default_licence", default=None,
              help="licence of rows that name none, e.g. MIT for a KernelBench folder")
@click.option("--near-dup-threshold", default=0.85, show_default=True, type=float,
              help="MinHash Jaccard similarity at which a row is a near duplicate of a kept one")
@click.option("--trials", default=3, show_default=True, type=click.IntRange(min=1), help="seeded trials per case")
@click.option("--timeout", default=60.0, show_default=True, type=float, help="seconds per row's sandboxed checks")
@click.option("--jobs", default=2, show_default=True, type=click.IntRange(min=1), help="rows checked at once")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="only the first N rows")
@click.option("--force", is_flag=True, help="replace an earlier ingest in --out")
@click.option("--json", "as_json", is_flag=True, help="print ingest_report.json")
def tasks_ingest(source: str, out_dir: str, corpus: str | None, allowed: tuple[str, ...], default_licence: str | None,
                 near_dup_threshold: float, trials: int, timeout: float, jobs: int, limit: int | None, force: bool,
                 as_json: bool) -> None:
    """Turn a corpus of PyTorch modules (KernelBook layout, or KernelBench .py files) into checked task files."""
    from tqdm import tqdm

    from amdkv.tasks.ingest import DEFAULT_ALLOWED, IngestSettings, ingest

    settings = IngestSettings(source=source, out=out_dir, corpus=corpus, allowed_licences=allowed or DEFAULT_ALLOWED,
                              default_licence=default_licence, near_duplicate_threshold=near_dup_threshold,
                              trials=trials, timeout=timeout, jobs=jobs, limit=limit, force=force)
    bar = tqdm(desc="sandboxed checks", unit="row", disable=as_json, file=sys.stderr)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        report = ingest(settings, progress=progress)
    finally:
        bar.close()
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        from amdkv.reports.task_checks import print_ingest_report

        print_ingest_report(report)
    sys.exit(EXIT_OK if report["kept"] else EXIT_FAILURES)


# ---------------------------------------------------------------------------------------- env
@main.command()
@click.option("--json", "as_json", is_flag=True)
def env(as_json: bool) -> None:
    """Print the machine, GPU and toolchain facts every verdict records."""
    from amdkv.config import VerifierConfig
    from amdkv.env import collect_env

    from amdkv.verify.os_sandbox import capabilities

    info = dict(collect_env(with_gpu=True, with_tools=True))
    config = VerifierConfig.from_env()
    info["verifier_settings"] = config.to_dict()  # what AMDKV_* asks for here
    # what that device setting resolves to on this machine (`auto` is the usual one): the platform
    # every verdict of a default run will name
    info["platform"] = _resolved_platform(config.device)
    # what the OS sandbox of the workers can hold on this machine (docs/sandbox.md)
    info["sandbox"] = {"mode": config.sandbox, **capabilities()}
    if as_json:
        click.echo(json.dumps(info, indent=2))
    else:
        width = max(len(k) for k in info)
        for k, v in info.items():
            click.echo(f"{k:<{width}}  {v}")


def _resolved_platform(device: str) -> dict[str, Any]:
    """`detect_platform(device)` as a dict, or the reason it fails here (e.g. `cuda` on a CPU machine)."""
    import dataclasses

    from amdkv.errors import BadInputError
    from amdkv.verify.platform import detect_platform

    try:
        info = detect_platform(device)
    except BadInputError as exc:
        return {"requested": device, "error": str(exc)}
    return {"requested": device, **dataclasses.asdict(info), "amd_target": info.is_target}


# --------------------------------------------------------------------------------------- demo
@main.command()
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]))
@click.option("--from", "spec", default="builtin:all", show_default=True,
              help="which tasks: builtin:..., procedural:train?n=100, or a folder whose tasks name their solutions")
@click.option("--language", default="triton", show_default=True, type=click.Choice(["triton", "hip"]))
@click.option("--task", "task_ids", multiple=True, help="only this task id (repeatable)")
@click.option("--jobs", default=2, show_default=True, help="candidates verified at the same time")
@click.option("--compile-baseline/--no-compile-baseline", default=True, show_default=True,
              help="on GPUs, also time torch.compile of the reference (slow the first time)")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), default=None,
              help="also write the verdicts as JSON lines to this file")
@click.option("--records", "records_dir", type=click.Path(file_okay=False), default=None,
              help="also write each verified solution as a record to this store (amdkv build --records)")
@click.option("--verdict-cache/--no-verdict-cache", default=None,
              help="reuse verdicts of identical earlier verifications (default: on, or AMDKV_VERDICT_CACHE)")
@click.option("--json", "as_json", is_flag=True)
def demo(device: str, spec: str, language: str, task_ids: tuple[str, ...], jobs: int, compile_baseline: bool,
         out_file: str | None, records_dir: str | None, verdict_cache: bool | None, as_json: bool) -> None:
    """Verify every reference solution of a suite on the best local device and print a table."""
    from tqdm import tqdm

    from amdkv.reports.jsonl import JsonlAppender
    from amdkv.tasks.solutions import solution_for
    from amdkv.tasks.suites import load_suite, select_ids
    from amdkv.verify.scheduler import open_verifier

    all_tasks = load_suite(spec)
    if task_ids:
        all_tasks = select_ids(all_tasks, task_ids, spec)
    pairs = [(t, str(solution_for(t, language))) for t in all_tasks if solution_for(t, language)]
    if not pairs:
        raise AmdkvError(f"no {language} reference solutions for {spec}", hint="try --language triton")
    # several visible GPUs: one scheduler per GPU (amdkv/verify/scheduler.py)
    with open_verifier(device, jobs=jobs, compile_baseline=compile_baseline, **_cache_setting(verdict_cache)) as verifier:
        bar = tqdm(total=len(pairs), desc=f"verifying on {verifier.platform.name}", unit="task",
                   disable=as_json, file=sys.stderr)
        counts = {"ok": 0}
        # each verdict is written as it arrives: a run cut short keeps what it finished
        out = JsonlAppender(out_file, fresh=True, allow_nan=True).open() if out_file else None
        store = None
        if records_dir:
            from amdkv.data.demo import SolutionRecords

            store = SolutionRecords(records_dir)
        lock = threading.Lock()  # results arrive from the verification threads

        def tick(task: Any, cand: str, verdict: Any) -> None:
            with lock:
                counts[verdict.status] = counts.get(verdict.status, 0) + 1
                bar.set_postfix(counts)
                bar.update(1)
            if out is not None:
                out.append(verdict.to_dict())
            if store is not None:
                store.add(task, cand, verdict)

        try:
            verdicts = verifier.verify_many(pairs, on_result=tick)
        finally:
            bar.close()
            if out is not None:
                out.close()
            if store is not None:
                store.close()
    if as_json:
        click.echo(json.dumps([v.to_dict() for v in verdicts], indent=2))
    else:
        from amdkv.reports.console import print_verdict_table

        print_verdict_table(verdicts, title=f"bundled {language} reference solutions ({spec})")
    bad = [v for v in verdicts if v.status not in ("ok", "unverifiable")]
    sys.exit(EXIT_FAILURES if bad else EXIT_OK)


# --------------------------------------------------------------------------------------- eval
@main.command("eval")
@click.argument("suite", required=False)
@click.option("--samples", "samples_file", type=click.Path(dir_okay=False), default=None,
              help='JSONL: {"task_id": ..., "samples": ["<source>", ...]} per line (docs/eval.md)')
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None, help="output folder (resumable)")
@click.option("--k", "k_text", default="1", show_default=True, help="comma-separated k for pass@k, e.g. 1,3")
@click.option("--p", "p_text", default="1.0", show_default=True, help="comma-separated p for fast_p")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]))
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="samples verified at once")
@click.option("--trials", default=3, show_default=True, type=click.IntRange(min=1), help="seeded trials per case")
@click.option("--timeout", type=float, default=None, help="seconds for each candidate's process")
@click.option("--bootstrap", default=1000, show_default=True, type=click.IntRange(min=0), help="CI resamples")
@click.option("--seed", default=0, show_default=True, help="bootstrap seed")
@click.option("--allow-partial", is_flag=True, help="tasks with fewer samples than k: report pass@k as not reportable")
@click.option("--verdict-cache/--no-verdict-cache", default=None,
              help="reuse verdicts of identical earlier verifications (default: on, or AMDKV_VERDICT_CACHE)")
@click.option("--policy", default="strict", show_default=True, type=click.Choice(["strict", "reference"]),
              help="reference: the sanity run of a benchmark's PyTorch references as candidates (docs/benchmarks.md)")
@click.option("--benchmark-verdicts/--no-benchmark-verdicts", default=None,
              help="also verify under the benchmark's own rule (default: on for external suites)")
@click.option("--model-name", default=None, help="the model named in model_index.json (default: samples file stem)")
@click.option("--compare", nargs=2, type=click.Path(), default=None, metavar="A B",
              help="compare two runs (folders or metrics.json) instead of evaluating")
@click.option("--verifier-url", default=None, metavar="URL",
              help="verify on an `amdkv serve` service (its device, jobs, trials and timeout apply)")
@click.option("--verifier-token", envvar=TOKEN_ENV, show_envvar=True, default=None,
              help="the service's bearer token")
@ray_option
@click.option("--json", "as_json", is_flag=True, help="print metrics.json (or the comparison) as JSON")
@click.pass_context
def eval_cmd(ctx: click.Context, suite: str | None, samples_file: str | None, out_dir: str | None, k_text: str,
             p_text: str, device: str, jobs: int, trials: int, timeout: float | None, bootstrap: int, seed: int,
             allow_partial: bool, verdict_cache: bool | None, policy: str, benchmark_verdicts: bool | None,
             model_name: str | None, compare: tuple[str, str] | None, verifier_url: str | None,
             verifier_token: str | None, ray_address: str | None, as_json: bool) -> None:
    """Verify a samples file against SUITE and write metrics.json, report.md and report.html to --out.

    \b
    amdkv eval SUITE --samples FILE.jsonl --out DIR [--k 1,3] [--p 1.0] [--device cpu] [--jobs N]
    amdkv eval SUITE --samples FILE.jsonl --out DIR --verifier-url http://HOST:8765
    amdkv eval SUITE --samples FILE.jsonl --out DIR --ray [auto|local|HOST:PORT] [--jobs PER_NODE]
    amdkv eval --compare RUN_A RUN_B [--json]
    """
    from amdkv import evaluation
    from amdkv.config import VerifierConfig

    if compare:
        if suite or samples_file or out_dir:
            raise click.UsageError("--compare A B takes no SUITE, --samples or --out")
        cmp = evaluation.compare_metrics(evaluation.load_metrics(compare[0]), evaluation.load_metrics(compare[1]))
        if as_json:
            click.echo(json.dumps(cmp, indent=2))
        else:
            evaluation.print_comparison(cmp)
        sys.exit(EXIT_OK)
    if not suite or not samples_file or not out_dir:
        raise click.UsageError("amdkv eval needs SUITE, --samples FILE.jsonl and --out DIR (or --compare A B)")
    local_only = [f"--{n}" for n in ("device", "jobs", "trials", "timeout")
                  if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT]
    check_one_verifier_source(verifier_url, ray_address)
    if verifier_url and local_only:
        raise click.UsageError(f"{', '.join(local_only)} set the local verifier; with --verifier-url the service's "
                               "own settings apply (see its /v1/health): drop them, or start the service with them")
    settings = evaluation.EvalSettings(
        suite=suite, samples=samples_file, out=out_dir, ks=evaluation.parse_int_list(k_text, "--k"),
        ps=evaluation.parse_float_list(p_text, "--p"), device=device, jobs=jobs, trials=trials, timeout=timeout,
        allow_partial=allow_partial, bootstrap=bootstrap, seed=seed, policy=policy,
        benchmark_verdicts=benchmark_verdicts, model_name=model_name, verifier_url=verifier_url,
        verifier_token=verifier_token, ray_address=ray_address,
        config=VerifierConfig.from_env(**_cache_setting(verdict_cache)), stop=threading.Event())
    from amdkv.signals import stop_on_signals

    with stop_on_signals(settings.stop, "amdkv eval"):
        outcome = evaluation.run_eval(settings, progress=not as_json)
    if as_json:
        click.echo(json.dumps(outcome.metrics, indent=2))
    else:
        from amdkv.evaluation.summary import print_summary

        print_summary(outcome)
    sys.exit(EXIT_INFRA if outcome.infra_errors else EXIT_OK)


@main.command("publish-metric")
@click.argument("module_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--repo-id", required=True, help="ORG/NAME of the Hub Space, e.g. amdkv/rocmbench")
@click.option("--tasks", "tasks_spec", default=None,
              help="also publish this suite's files as the dataset ORG/NAME-tasks (licences permitting)")
@click.option("--private", is_flag=True, help="create the Space private")
@click.option("--dry-run", is_flag=True, help="stage and check everything, upload nothing")
@click.option("--json", "as_json", is_flag=True)
def publish_metric_cmd(module_dir: str, repo_id: str, tasks_spec: str | None, private: bool, dry_run: bool,
                       as_json: bool) -> None:
    """Publish an `evaluate` metric module folder (eval/metrics/NAME) as a Hub Space."""
    from amdkv.evaluation.publish_metric import publish_metric

    result = publish_metric(module_dir, repo_id, tasks_spec=tasks_spec, private=private, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        for line in result["log"]:
            click.echo(line)


def _register_optional_groups() -> None:
    """Stage groups that live in their own packages (loaded only if present). Their modules import
    click only: FastAPI and friends load when the command runs, never for `amdkv --help`."""
    from amdkv.data.cli import register as register_data  # build, publish, reverify, records (click only)

    register_data(main)
    try:
        from amdkv.toolchain.cli import toolchain_group
    except ImportError:
        pass
    else:
        main.add_command(toolchain_group)
    try:
        from amdkv.serve.cli import serve_command
    except ImportError:
        pass
    else:
        main.add_command(serve_command)
    from amdkv.gen.cli import gen_group

    main.add_command(gen_group)
    from amdkv.verify.cache_cli import cache_group

    main.add_command(cache_group)


_register_optional_groups()

if __name__ == "__main__":
    main()
