"""`amdkv serve`: the click command. Light at import (click only): `amdkv --help` lists it without
importing FastAPI, uvicorn or torch; server.py loads them when the command runs."""

from __future__ import annotations

import click

from amdkv.serve.protocol import (DEFAULT_DEADLINE_S, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_DEADLINE_S,
                                  DEFAULT_MAX_QUEUE, DEFAULT_PORT, TOKEN_ENV)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="address to listen on; anything but loopback needs a token")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="0: any free port (the startup line names it)")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]))
@click.option("--gpus", default=None, help="GPUs to use: N (the first N) or a list like 0,2 (default: every visible one)")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="candidates verified at once, over all GPUs (default: $AMDKV_JOBS or 1)")
@click.option("--tasks", "suite", default="builtin:all", show_default=True,
              help="the suite requests name tasks of: builtin:..., a folder or a task file")
@click.option("--token", envvar=TOKEN_ENV, show_envvar=True, default=None,
              help="bearer token clients must send (prefer the environment variable: a command line is visible "
                   "to every user of the machine)")
@click.option("--max-queue", default=DEFAULT_MAX_QUEUE, show_default=True, type=click.IntRange(min=1),
              help="submissions admitted and not finished at most; beyond it: 429 with Retry-After")
@click.option("--max-body-mib", default=DEFAULT_MAX_BODY_BYTES / (1 << 20), show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="largest request body")
@click.option("--deadline-s", default=DEFAULT_DEADLINE_S, show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="default per-request deadline")
@click.option("--max-deadline-s", default=DEFAULT_MAX_DEADLINE_S, show_default=True,
              type=click.FloatRange(min=0, min_open=True), help="largest deadline a request may ask for")
@click.option("--task-source/--no-task-source", default=True, show_default=True,
              help="accept tasks sent as source text (loaded in a sandboxed process)")
@click.option("--evaluate-open", is_flag=True,
              help="serve AMDKernelVault's POST /evaluate and GET /health without the token (their client "
                   "sends none); only on a network you trust")
@click.option("--verdict-cache/--no-verdict-cache", default=None,
              help="reuse verdicts of identical verifications (default: $AMDKV_VERDICT_CACHE, on)")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]), help="uvicorn's log level")
@click.option("--access-log", is_flag=True, help="log every request (off by default)")
def serve_command(host: str, port: int, device: str, gpus: str | None, jobs: int | None, suite: str,
                  token: str | None, max_queue: int, max_body_mib: float, deadline_s: float, max_deadline_s: float,
                  task_source: bool, evaluate_open: bool, verdict_cache: bool | None, log_level: str,
                  access_log: bool) -> None:
    """Run a verification service for this node's GPUs (protocol: docs/serve.md).

    \b
    amdkv serve --device rocm --jobs 8                  # loopback, no token
    AMDKV_SERVE_TOKEN=... amdkv serve --host 0.0.0.0     # other machines: token required
    amdkv eval builtin:eval --samples s.jsonl --out r --verifier-url http://HOST:8765
    """
    from amdkv.serve.service import ServeSettings

    settings = ServeSettings(host=host, port=port, token=token, max_queue=max_queue,
                             max_body_bytes=int(max_body_mib * (1 << 20)), default_deadline_s=deadline_s,
                             max_deadline_s=max_deadline_s, allow_task_source=task_source,
                             evaluate_open=evaluate_open).check()
    overrides = {"device": device}
    if jobs is not None:
        overrides["jobs"] = jobs
    if verdict_cache is not None:
        overrides["verdict_cache"] = verdict_cache
    from amdkv.serve.server import run_server

    run_server(settings, suite=suite, config_overrides=overrides, gpus=gpus, log_level=log_level,
               access_log=access_log)

