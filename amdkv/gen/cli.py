"""`amdkv gen`: generate kernels with a language model (triton, hip) and ROCm-library QA (rocm-qa).

    amdkv gen triton --tasks builtin:train --llm openai --model Qwen/Qwen3-8B \\
        --base-url http://localhost:8000/v1 --turns 3 --samples 4 --out runs/triton
    amdkv gen hip --tasks builtin:train --llm replay --script write=compile_error --out runs/hip-replay
    amdkv gen rocm-qa --source /src/rocblas --library rocBLAS --llm openai ... --out runs/qa
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable

import click

from amdkv.cluster.options import check_one_verifier_source, ray_option
from amdkv.errors import EXIT_OK


def _gen_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options `amdkv gen triton` and `amdkv gen hip` share (one definition for both)."""
    options = [
        click.option("--tasks", "tasks_spec", required=True, help="suite: builtin:train, builtin:all, a folder, ..."),
        click.option("--task", "task_ids", multiple=True, help="only this task id (repeatable)"),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="only the first N tasks"),
        click.option("--llm", type=click.Choice(["openai", "hf", "replay"]), default="openai", show_default=True),
        click.option("--model", default=None, help="served model name (openai), local model folder (hf)"),
        click.option("--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"),
        click.option("--api-key", default=None, help="default: OPENAI_API_KEY, else none"),
        click.option("--replay-from", default=None, type=click.Path(exists=True),
                     help="replay: a samples file, records folder or dataset folder (default: scripted)"),
        click.option("--script", default=None, help="scripted replay: STAGE=ACTION,... e.g. write=compile_error"),
        click.option("--turns", default=3, show_default=True, type=click.IntRange(min=1), help="requests per trajectory"),
        click.option("--samples", default=1, show_default=True, type=click.IntRange(min=1),
                     help="independent trajectories per task"),
        click.option("--temperature", default=0.7, show_default=True, type=float),
        click.option("--top-p", default=0.95, show_default=True, type=float),
        click.option("--max-tokens", default=4096, show_default=True, type=click.IntRange(min=1),
                     help="completion tokens per request"),
        click.option("--seed", default=None, type=int, help="sampling seed sent to the server (part of the cache key)"),
        click.option("--extra-body", default=None, help="JSON object of server-specific request fields (e.g. top_k)"),
        click.option("--max-trajectory-tokens", default=None, type=click.IntRange(min=1),
                     help="completion tokens one trajectory may use"),
        click.option("--token-budget", default=None, type=click.IntRange(min=1),
                     help="completion tokens this invocation may generate (then it stops; re-run to go on)"),
        click.option("--max-wall", default=None, type=float, help="seconds this invocation may run (then it stops)"),
        click.option("--stop-on-ok/--optimise", default=False, show_default=True,
                     help="end a trajectory at its first correct kernel instead of optimising it"),
        click.option("--optimise-from", default=None,
                     help="start from an existing kernel: `reference` (the task's solution) or a samples file / "
                          "records folder"),
        click.option("--functional-reference", is_flag=True,
                     help="first ask for a functional PyTorch version of Model.forward, check it against the module "
                          "(reference policy) and show it in the write request"),
        click.option("--arch", default="gfx942", show_default=True, help="AMD target named in the prompt"),
        click.option("--shots", default=1, show_default=True, type=click.IntRange(min=0), help="few-shot examples"),
        click.option("--instruction-style", default="auto", show_default=True,
                     type=click.Choice(["auto", "simp", "comp"]),
                     help="TritonBench-G tasks: the benchmark's simple or complex instructions (auto: comp when "
                          "the task has it); docs/benchmarks.md, \"Prompts\""),
        click.option("--concurrency", default=8, show_default=True, type=click.IntRange(min=1),
                     help="model requests in flight"),
        click.option("--active-tasks", default=None, type=click.IntRange(min=1),
                     help="tasks in progress at once (default 2 x concurrency + 4)"),
        click.option("--max-llm-failures", default=3, show_default=True, type=click.IntRange(min=1),
                     help="consecutive requests failing for good before the run stops starting work"),
        click.option("--retries", default=6, show_default=True, type=click.IntRange(min=1),
                     help="attempts per request on transient errors"),
        click.option("--request-timeout", default=600.0, show_default=True, type=float),
        click.option("--request-cache", default=None, help="request cache folder (default OUT/requests; '' = off)"),
        click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]),
                     help="where programs are verified"),
        click.option("--jobs", default=2, show_default=True, type=click.IntRange(min=1), help="verifications at once"),
        click.option("--verifier-url", default=None, help="an `amdkv serve` service instead of a local verifier"),
        click.option("--verifier-token", default=None, help="bearer token of the service"),
        ray_option,
        click.option("--hf-device", default="auto", show_default=True, help="--llm hf: where the model runs"),
        click.option("--verdict-cache/--no-verdict-cache", default=None,
                     help="reuse verdicts of identical earlier verifications (default: on)"),
        click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="run folder (resumable)"),
        click.option("--json", "as_json", is_flag=True, help="print the summary as JSON"),
    ]
    return functools.reduce(lambda f, opt: opt(f), reversed(options), fn)


@click.group("gen")
def gen_group() -> None:
    """Generate kernels with a language model, verified turn by turn (docs/gen.md)."""


@gen_group.command("triton")
@_gen_options
def gen_triton(**options: Any) -> None:
    """TritonKernelGen: PyTorch module -> Triton kernel -> verify -> fix -> optimise."""
    _run("triton", options)


@gen_group.command("hip")
@_gen_options
def gen_hip(**options: Any) -> None:
    """HIPKernelGen: PyTorch module -> HIP kernel (or --optimise-from an existing one) -> verify -> fix -> optimise."""
    _run("hip", options)


def _run(language: str, o: dict[str, Any]) -> None:
    from amdkv.config import VerifierConfig
    from amdkv.errors import BadInputError
    from amdkv.gen.agent import AgentConfig
    from amdkv.gen.llm import SamplingParams
    from amdkv.gen.pipeline import PipelineSettings
    from amdkv.gen.retry import RetryPolicy
    from amdkv.gen.run import GenSettings, run_gen
    from amdkv.signals import stop_on_signals
    from amdkv.prompts import PromptConfig

    check_one_verifier_source(o["verifier_url"], o["ray_address"])
    try:
        extra = json.loads(o["extra_body"]) if o["extra_body"] else {}
    except ValueError as exc:
        raise BadInputError(f"--extra-body is not JSON: {exc}", hint='e.g. --extra-body \'{"top_k": 20}\'') from exc
    if not isinstance(extra, dict):
        raise BadInputError("--extra-body must be a JSON object", hint='e.g. --extra-body \'{"top_k": 20}\'')
    params = SamplingParams(temperature=o["temperature"], top_p=o["top_p"], max_tokens=o["max_tokens"],
                            seed=o["seed"], extra=extra)
    style = None if o["instruction_style"] == "auto" else o["instruction_style"]
    prompt = PromptConfig(language=language, arch=o["arch"], shots=o["shots"], instruction_style=style)
    agent = AgentConfig(language=language, prompt=prompt,
                        params=params, turns=o["turns"], samples=o["samples"],
                        max_trajectory_tokens=o["max_trajectory_tokens"], stop_on_ok=o["stop_on_ok"],
                        optimise_from=o["optimise_from"], functional_reference=o["functional_reference"])
    import threading
    import time

    stop = threading.Event()
    pipeline = PipelineSettings(llm_concurrency=o["concurrency"], max_active_tasks=o["active_tasks"],
                                deadline=time.monotonic() + o["max_wall"] if o["max_wall"] else None,
                                token_budget=o["token_budget"], max_llm_failures=o["max_llm_failures"], stop=stop)
    cache = {} if o["verdict_cache"] is None else {"verdict_cache": o["verdict_cache"]}
    settings = GenSettings(tasks=o["tasks_spec"], out=o["out_dir"], agent=agent, llm=o["llm"], model=o["model"],
                           base_url=o["base_url"], api_key=o["api_key"], task_ids=tuple(o["task_ids"]),
                           limit=o["limit"], replay_from=o["replay_from"], script=o["script"],
                           request_cache=o["request_cache"], request_timeout=o["request_timeout"],
                           retry=RetryPolicy(attempts=o["retries"]), hf_device=o["hf_device"], pipeline=pipeline,
                           verifier=VerifierConfig.from_env(device=o["device"], jobs=o["jobs"], **cache),
                           verifier_url=o["verifier_url"], verifier_token=o["verifier_token"],
                           ray_address=o["ray_address"])
    with stop_on_signals(stop, "amdkv gen"):
        outcome = run_gen(settings, progress=not o["as_json"])
    if o["as_json"]:
        click.echo(json.dumps(outcome.summary, indent=2, default=str))
    else:
        print_gen_summary(outcome.summary)
    if outcome.error is not None:
        click.echo(f"error: {outcome.error}", err=True)
    elif outcome.exit_code != EXIT_OK:
        click.echo("some trajectories could not be finished (see abandoned); run the same command again to "
                   "continue them", err=True)
    if stop.is_set():
        # stopped by a signal: the records, samples file and summary are written and the verifier is
        # closed; model requests still in flight would hold the exit (the interpreter joins the client's
        # threads at exit) for as long as the server takes to answer, and nothing waits for their replies
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(outcome.exit_code)
    sys.exit(outcome.exit_code)


@gen_group.command("rocm-qa")
@click.option("--source", "sources", multiple=True, required=True, type=click.Path(exists=True, file_okay=False),
              help="a library's source tree (repeatable): a git checkout, a Debian source package, any folder")
@click.option("--library", "libraries", multiple=True, help="a name per --source (default: Debian source or folder name)")
@click.option("--llm", type=click.Choice(["openai", "hf", "replay"]), default="openai", show_default=True,
              help="replay: the scripted QA model (no model; docs/gen.md)")
@click.option("--model", default=None)
@click.option("--base-url", default=None)
@click.option("--api-key", default=None)
@click.option("--pairs", "pairs_per_chunk", default=3, show_default=True, type=click.IntRange(min=1),
              help="pairs asked per chunk")
@click.option("--max-chunks", default=None, type=click.IntRange(min=1), help="per tree, spread evenly")
@click.option("--max-lines", default=120, show_default=True, type=click.IntRange(min=10), help="lines per chunk")
@click.option("--max-span", default=80, show_default=True, type=click.IntRange(min=1), help="cited lines per pair")
@click.option("--temperature", default=0.3, show_default=True, type=float)
@click.option("--max-tokens", default=2048, show_default=True, type=click.IntRange(min=1))
@click.option("--concurrency", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--retries", default=6, show_default=True, type=click.IntRange(min=1))
@click.option("--request-cache", default=None, help="request cache folder (default OUT/requests; '' = off)")
@click.option("--licence", default=None, help="licence of the trees (default: detected)")
@click.option("--chunks-only", is_flag=True, help="only chunk the trees and count (no model)")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def gen_rocm_qa(sources: tuple[str, ...], libraries: tuple[str, ...], llm: str, model: str | None,
                base_url: str | None, api_key: str | None, pairs_per_chunk: int, max_chunks: int | None,
                max_lines: int, max_span: int, temperature: float, max_tokens: int, concurrency: int, retries: int,
                request_cache: str | None, licence: str | None, chunks_only: bool, out_dir: str,
                as_json: bool) -> None:
    """Question-answer pairs grounded in ROCm library sources, written as `rocm_qa` records."""
    from amdkv.gen.llm import SamplingParams
    from amdkv.gen.qa.run import QASettings, run_qa
    from amdkv.gen.retry import RetryPolicy

    settings = QASettings(sources=sources, out=out_dir, libraries=libraries, llm=llm, model=model, base_url=base_url,
                          api_key=api_key, params=SamplingParams(temperature=temperature, max_tokens=max_tokens),
                          pairs_per_chunk=pairs_per_chunk, max_chunks=max_chunks, max_lines=max_lines,
                          max_span=max_span, concurrency=concurrency, request_cache=request_cache,
                          retry=RetryPolicy(attempts=retries), licence=licence, chunks_only=chunks_only)
    outcome = run_qa(settings, progress=not as_json)
    if as_json:
        click.echo(json.dumps(outcome.summary, indent=2, default=str))
    else:
        print_qa_summary(outcome.summary)
    if outcome.error is not None:
        click.echo(f"error: {outcome.error}", err=True)
    sys.exit(outcome.exit_code)


def print_qa_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="rocm-qa: chunks per library")
    for col in ("library", "commit", "files", "chunks", "functions", "classes", "truncated"):
        table.add_column(col)
    for lib, st in summary["chunks"].items():
        table.add_row(lib, str(st["commit"])[:40], *(str(st[k]) for k in ("files", "chunks", "functions", "classes",
                                                                         "truncated")))
    Console().print(table)
    if "this_invocation" in summary:
        inv = summary["this_invocation"]
        drops = ", ".join(f"{k[5:]}: {v}" for k, v in sorted(inv.items()) if k.startswith("drop:")) or "none"
        Console().print(f"chunks asked {inv['chunks_asked']}, pairs proposed {inv.get('proposed', 0)}, kept "
                        f"{inv.get('kept', 0)}, dropped {inv.get('dropped', 0)} ({drops}); pairs recorded in the run: "
                        f"{summary['pairs_recorded']}")


def print_gen_summary(summary: dict[str, Any]) -> None:
    """The summary as a readable table (rich)."""
    from rich.console import Console
    from rich.table import Table

    run, tasks, trajs = summary["run"], summary["tasks"], summary["trajectories"]
    out, tok, thr, act = summary["outcomes"], summary["tokens"], summary["throughput"], summary["activity"]
    n = max(trajs["recorded"], 1)
    table = Table(title=f"{run['agent']} · {run['model']} · {run['tasks']} · verified on {run['platform'] or '-'}")
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [
        ("tasks selected / complete / with a correct kernel",
         f"{tasks['selected']} / {tasks['complete']} / {tasks['with_correct_kernel']}"),
        ("tasks skipped", ", ".join(f"{k}: {v}" for k, v in tasks["skipped"].items()) or "0"),
        ("trajectories recorded (this invocation)", f"{trajs['recorded']} ({trajs['recorded_now']})"),
        ("compiled / correct / correct at turn 0",
         f"{out['compiled']} ({out['compiled'] / n:.0%}) / {out['correct']} ({out['correct'] / n:.0%}) / "
         f"{out['first_turn_correct']}"),
        ("per turn: asked/program/compiled/ok",
         "  ".join(f"t{p['turn']}: {p['asked']}/{p['program']}/{p['compiled']}/{p['ok']}" for p in out["per_turn"])),
        ("stop reasons", ", ".join(f"{k}: {v}" for k, v in out["stop_reasons"].items()) or "-"),
        ("best speedup (geomean over tasks)", f"{out['best_speedup_geomean']} ({out['speedup_platform']})"
         if out["best_speedup_geomean"] else "-"),
        ("abandoned (re-run continues them)", ", ".join(f"{k}: {v}" for k, v in trajs["abandoned_now"].items()) or "0"),
        ("requests / retries / short choices / cached replies",
         f"{int(tok['requests'])} / {int(tok['retries'])} / {int(tok['short_choices'])} / {int(tok['cached_replies'])}"),
        ("tokens prompt / completion (generated now)", f"{int(tok['prompt_tokens'])} / {int(tok['completion_tokens'])}"),
        ("wall s / tasks per min / completion tokens per s",
         f"{thr['wall_s']} / {thr['tasks_per_min']} / {thr['completion_tokens_per_s']}"),
        ("verifications (s waited in total) / infra errors retried",
         f"{thr['verifications']} ({thr['verify_seconds']}) / {thr.get('infra_errors', 0)}"),
        ("generation waited for verification (share of wall)", f"{act.get('gen_waited_share', 0):.1%}"
         if act else "-"),
    ]
    for label, value in rows:
        table.add_row(label, str(value))
    Console(stderr=False).print(table)
    if summary.get("stopped"):
        Console().print(f"stopped early: {summary['stopped']}")
