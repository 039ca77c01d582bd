"""`amdkv gen {triton,hip}` as a library call: one resumable run folder.

    outcome = run_gen(GenSettings(tasks="builtin:train", llm="openai", model="Qwen/Qwen3-8B",
                                  base_url="http://localhost:8000/v1", out="runs/triton",
                                  agent=AgentConfig(language="triton", turns=3, samples=4)))

The run folder:

    OUT/manifest.json   what decides the trajectories (model, agent, prompt config, sampling,
                        budgets) and its hash, the run key; every invocation appended
    OUT/records/        finished trajectories, one `trajectory` record each, in a record store
                        (amdkv.data.store; `amdkv build --records OUT` reads it)
    OUT/requests/       the request cache (amdkv/gen/request_cache.py)
    OUT/samples.jsonl   every turn's program per task with `turns` (for `amdkv eval`)
    OUT/summary.json    the last invocation's summary and the totals over the folder

Resuming: a trajectory's resume key is derived from (task, language, run key, agent, model,
sample), so a re-run skips every trajectory already recorded and redoes only those that were in
progress; their requests come back from the request cache and their programs' verdicts from the
verdict cache, so nothing is generated twice. A re-run with different settings that decide
trajectories is refused (use another folder); more `--samples` or more tasks extend the run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from amdkv.config import VerifierConfig
from amdkv.data.records import TRAJECTORY, Record, work_key
from amdkv.data.store import RecordStore
from amdkv.errors import BadInputError, EXIT_BAD_INPUT, EXIT_INFRA, EXIT_OK
from amdkv.gen.agent import AgentConfig, agent_for
from amdkv.gen.pipeline import GenPipeline, PipelineResult, PipelineSettings
from amdkv.gen.retry import RetryPolicy
from amdkv.gen.rundir import open_manifest, write_json

LLM_KINDS = ("openai", "hf", "replay")
# abandon reasons a re-run can fix (the run ends with exit code 3 when any occurred)
INFRA_REASONS = ("llm_unavailable", "infra_error", "verify_submit_failed", "llm_error")


@dataclasses.dataclass(frozen=True)
class GenSettings:
    """Everything one `amdkv gen` invocation needs (the CLI fills it; see `amdkv gen --help`).

    `replay_from`: a samples file, records folder or dataset to replay (llm=replay); without it
    the replay is scripted (`script`, e.g. `write=compile_error`) from each task's solution.
    `request_cache`: folder of the request cache (None: OUT/requests; "" switches it off)."""

    tasks: str
    out: str
    agent: AgentConfig = dataclasses.field(default_factory=AgentConfig)
    llm: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    task_ids: tuple[str, ...] = ()
    limit: int | None = None
    replay_from: str | None = None
    script: str | None = None
    request_cache: str | None = None
    request_timeout: float = 600.0
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    hf_device: str = "auto"
    pipeline: PipelineSettings = dataclasses.field(default_factory=PipelineSettings)
    verifier: VerifierConfig = dataclasses.field(default_factory=VerifierConfig)
    verifier_url: str | None = None
    verifier_token: str | None = None
    ray_address: str | None = None     # verify on a Ray cluster (docs/ray.md)

    def __post_init__(self) -> None:
        if self.llm not in LLM_KINDS:
            raise BadInputError(f"unknown --llm {self.llm!r}", hint=f"use one of {', '.join(LLM_KINDS)}")
        if self.llm == "openai" and (not self.model or not self.base_url):
            raise BadInputError("--llm openai needs --model and --base-url",
                                hint="e.g. --model Qwen/Qwen3-8B --base-url http://localhost:8000/v1")
        if self.llm == "hf" and not self.model:
            raise BadInputError("--llm hf needs --model (a local model folder)", hint="e.g. --model ./checkpoints/sft")
        if self.agent.functional_reference and self.verifier_url:
            raise BadInputError("--functional-reference checks the functional program with a local verifier under "
                                "the `reference` policy; an `amdkv serve` service runs one policy",
                                hint="drop --functional-reference or --verifier-url")
        if self.llm != "replay" and (self.replay_from or self.script):
            raise BadInputError("--replay-from and --script are for --llm replay", hint="drop them or use --llm replay")

    @property
    def model_name(self) -> str:
        if self.model:
            return self.model
        return f"replay:{Path(self.replay_from).name}" if self.replay_from else "scripted"


@dataclasses.dataclass
class GenOutcome:
    summary: dict[str, Any]
    exit_code: int
    error: BaseException | None = None


# ------------------------------------------------------------------------------------ the run
def run_gen(settings: GenSettings, *, client: Any = None, verifier: Any = None, functional_verifier: Any = None,
            progress: bool = True) -> GenOutcome:
    """One invocation (see the module docstring). `client`/`verifier`/`functional_verifier` (the
    `reference`-policy verifier of the functional stage): use these instead of opening them from
    the settings (tests, or an embedding program); they are not closed here."""
    started = time.monotonic()
    out = Path(settings.out)
    tasks = select_tasks(settings)
    own_client = client is None
    if own_client and settings.replay_from:  # parsed now (no resources to close): its replies join the identity
        client = build_client(settings, tasks)
    identity = {"model": settings.model_name, **settings.agent.identity()}
    if settings.script:  # a scripted replay's script decides its replies as a model's weights do
        identity["replay_script"] = settings.script
    replay_sha = getattr(client, "content_sha256", None)
    if replay_sha:  # stored replay: the replies it serves, not the file's name
        identity["replay_sha256"] = replay_sha
    run_key = open_manifest(out, identity, {
        "tasks": settings.tasks, "task_ids": list(settings.task_ids), "samples": settings.agent.samples,
        "llm": settings.llm, "base_url": settings.base_url, "replay_from": settings.replay_from,
        "script": settings.script, "verifier_url": settings.verifier_url, "device": settings.verifier.device})
    records = RecordStore(out / "records")
    agent = agent_for(settings.agent, model=settings.model_name, run_key=run_key)
    client = client or build_client(settings, tasks)
    try:
        work, skipped = _plan(tasks, agent, client, records, settings)
        result = PipelineResult()
        if work:
            own_verifier = verifier is None
            verifier = verifier or open_gen_verifier(settings)
            own_functional = functional_verifier is None and settings.agent.functional_reference
            if own_functional:
                functional_verifier = open_functional_verifier(settings)
            try:
                total = sum(len(s) for _, s, _ in work)
                with _Progress(total, settings, enabled=progress) as bar:
                    pipeline = GenPipeline(agent, client, verifier,
                                           record=lambda traj, task, origin: records.append(
                                               Record.from_trajectory(traj, task, origin=origin), once_per_work_key=True),
                                           settings=settings.pipeline, on_event=bar.event,
                                           functional_verifier=functional_verifier)
                    result = pipeline.run(work)
            finally:
                # stopped by a signal: work in flight is not waited for (BaseVerifier.cancel)
                interrupted = result.stopped == "interrupted"
                if own_verifier:
                    verifier.cancel() if interrupted else verifier.close()
                if own_functional:
                    functional_verifier.cancel() if interrupted else functional_verifier.close()
        platform = getattr(getattr(verifier, "platform", None), "name", None)
        write_samples_file(out / "samples.jsonl", records.dicts(TRAJECTORY), run_key)
        summary = build_summary(settings, run_key, tasks, records.dicts(TRAJECTORY), result, client.stats.to_dict(),
                                skipped, time.monotonic() - started, platform)
        write_json(out / "summary.json", summary)
    finally:
        records.close()
        if own_client:
            client.close()
    if result.fatal is not None:
        return GenOutcome(summary, EXIT_BAD_INPUT, result.fatal)
    infra = sum(v for k, v in result.abandoned.items()
                if k.split(":")[-1] in INFRA_REASONS or k.startswith("not_started") or k == "interrupted")
    return GenOutcome(summary, EXIT_INFRA if infra else EXIT_OK)


def select_tasks(settings: GenSettings) -> list[Any]:
    from amdkv.tasks.suites import load_suite, select_ids

    tasks = load_suite(settings.tasks)
    if settings.task_ids:
        tasks = select_ids(tasks, settings.task_ids, settings.tasks)
    if settings.limit is not None:
        tasks = tasks[: settings.limit]
    if not tasks:
        raise BadInputError(f"no tasks selected from {settings.tasks}", hint="check --tasks, --task and --limit")
    return tasks


def _plan(tasks: list[Any], agent: Any, client: Any, records: Any, settings: GenSettings
          ) -> tuple[list[tuple[Any, list[int], str | None]], dict[str, int]]:
    """What is left to do: per task, the samples not yet recorded and the seed program (optimise_from)."""
    from amdkv.gen.agent import Attempt
    from amdkv.gen.replay import solutions_from

    cfg = settings.agent
    seeds: Callable[[str], str | None] | None = None
    if cfg.optimise_from:
        seeds = solutions_from(tasks, cfg.language, None if cfg.optimise_from == "reference" else cfg.optimise_from)
    coverage = getattr(client, "coverage", None)
    work, skipped = [], Counter()
    for task in tasks:
        todo = [j for j in range(cfg.samples)
                if not records.done(work_key(TRAJECTORY, task_id=task.id, task_source_hash=task.source_hash,
                                             language=cfg.language, origin=agent.origin(Attempt(task, j))))]
        if coverage is not None:
            stored = coverage(task.id)
            if stored == 0:
                skipped["no_replay_data"] += 1
                continue
            todo = [j for j in todo if j < stored]
        seed = None
        if seeds is not None:
            seed = seeds(task.id)
            if seed is None:
                skipped["no_starting_program"] += 1
                continue
        if todo:
            work.append((task, todo, seed))
    return work, dict(skipped)


# ----------------------------------------------------------------------- clients and verifiers
def build_client(settings: GenSettings, tasks: list[Any]) -> Any:
    """The client `settings.llm` asks for, with the request cache in front of model clients."""
    if settings.llm == "replay":
        from amdkv.gen.replay import ScriptedReplay, StoredReplay, parse_script, solutions_from

        if settings.replay_from:
            return StoredReplay.from_path(settings.replay_from, model=settings.model_name)
        return ScriptedReplay(solutions_from(tasks, settings.agent.language), parse_script(settings.script),
                              model=settings.model_name)
    from amdkv.gen.clients import open_model_client, request_cache_dir

    cache = request_cache_dir(settings.request_cache, settings.out)
    return open_model_client(settings.llm, settings.model, base_url=settings.base_url, api_key=settings.api_key,
                             concurrency=settings.pipeline.llm_concurrency, request_timeout=settings.request_timeout,
                             retry=settings.retry, hf_device=settings.hf_device, cache_dir=cache)


def open_functional_verifier(settings: GenSettings) -> Any:
    """The local verifier of the functional stage: the run's settings under the `reference` policy
    (plain PyTorch compute allowed, every other rule kept)."""
    from amdkv.cluster import open_run_verifier

    return open_run_verifier(settings.verifier.replace(policy="reference"), ray_address=settings.ray_address)


def open_gen_verifier(settings: GenSettings) -> Any:
    """A RemoteVerifier for --verifier-url, a RayVerifier for --ray, else the local verifier the
    config asks for."""
    if settings.verifier_url:
        try:
            from amdkv.serve.client import RemoteVerifier
        except ImportError as exc:
            raise BadInputError("--verifier-url needs amdkv.serve, which this installation lacks",
                                hint="install amdkv with the serve extra or verify locally") from exc
        return RemoteVerifier(settings.verifier_url, token=settings.verifier_token)
    from amdkv.cluster import open_run_verifier

    return open_run_verifier(settings.verifier, ray_address=settings.ray_address)


# ---------------------------------------------------------------------------- outputs
NO_PROGRAM = "# amdkv gen: turn {turn} gave no program (extraction: {reason})\n"


def write_samples_file(path: Path, records: Iterable[dict[str, Any]], run_key: str) -> int:
    """Every turn's program per task, runs in sample order, with `turns` (the `amdkv eval` format).
    A turn without a program is written as a one-line comment so that turn numbers stay aligned
    (it fails verification, as the turn did). Returns the number of task lines."""
    by_task: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for rec in records:
        if rec["origin"].get("run") == run_key:
            by_task.setdefault(rec["trajectory"]["task_id"], []).append((rec["origin"]["sample"], rec["trajectory"]))
    lines = []
    for task_id in sorted(by_task):
        samples, turns = [], []
        for _, traj in sorted(by_task[task_id], key=lambda x: x[0]):
            for t, turn in enumerate(traj["turns"]):
                samples.append(turn["code"] if turn["code"] else NO_PROGRAM.format(turn=t, reason=turn["extraction"]))
                turns.append(t)
        if samples:
            lines.append(json.dumps({"task_id": task_id, "samples": samples, "turns": turns}, ensure_ascii=False))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, path)
    return len(lines)


def build_summary(settings: GenSettings, run_key: str, tasks: list[Any], records: Iterable[dict[str, Any]],
                  result: PipelineResult, client_stats: dict[str, float], skipped: dict[str, int], wall_s: float,
                  platform: str | None) -> dict[str, Any]:
    """The run's summary: this invocation's throughput and the folder's totals (docs/gen.md)."""
    selected = {t.id for t in tasks}
    trajs = [r["trajectory"] for r in records if r["origin"].get("run") == run_key and r["trajectory"]["task_id"] in selected]
    per_task: dict[str, list[dict[str, Any]]] = {}
    for tr in trajs:
        per_task.setdefault(tr["task_id"], []).append(tr)
    if platform is None:
        # no verifier opened (a re-run with nothing left to do): the recorded verdicts still say
        # where the folder's programs were judged, and summary.json must not lose that
        platform = ",".join(sorted({(t.get("verdict") or {}).get("platform") for tr in trajs for t in tr["turns"]}
                                   - {None})) or None
    n = len(trajs) or 1
    status = lambda turn: (turn.get("verdict") or {}).get("status")  # noqa: E731
    compiled = sum(any((t.get("verdict") or {}).get("compiled") for t in tr["turns"]) for tr in trajs)
    correct = [tr for tr in trajs if any(status(t) == "ok" for t in tr["turns"])]
    first_ok = sum(bool(tr["turns"]) and status(tr["turns"][0]) == "ok" for tr in trajs)
    per_turn = []
    for k in range(max((len(tr["turns"]) for tr in trajs), default=0)):
        at_k = [tr["turns"][k] for tr in trajs if len(tr["turns"]) > k]
        per_turn.append({"turn": k, "asked": len(at_k), "program": sum(t["code"] is not None for t in at_k),
                         "compiled": sum(bool((t.get("verdict") or {}).get("compiled")) for t in at_k),
                         "ok": sum(status(t) == "ok" for t in at_k)})
    speedups = []
    for task_trajs in per_task.values():
        best = [t["verdict"].get("speedup") for tr in task_trajs for t in tr["turns"]
                if status(t) == "ok" and (t["verdict"].get("speedup") or 0) > 0]
        if best:
            speedups.append(max(best))
    done_tasks = sum(len(per_task.get(t.id, [])) >= settings.agent.samples for t in tasks)
    recorded_tokens = sum(t.get("completion_tokens") or 0 for tr in trajs for t in tr["turns"])
    generated = client_stats.get("completion_tokens", 0)
    minutes = max(wall_s, 1e-9) / 60
    return {
        "run": {"run_key": run_key, "out": str(settings.out), "tasks": settings.tasks, "model": settings.model_name,
                "llm": settings.llm, "agent": settings.agent.agent_name, "language": settings.agent.language,
                "arch": settings.agent.prompt.arch, "prompt_version": settings.agent.prompt.version,
                "turns": settings.agent.turns, "samples": settings.agent.samples, "platform": platform,
                "verifier_url": settings.verifier_url, "ray_address": settings.ray_address},
        "tasks": {"selected": len(tasks), "complete": done_tasks, "incomplete": len(tasks) - done_tasks
                  - sum(skipped.values()), "skipped": skipped, "with_correct_kernel": len({tr["task_id"] for tr in correct})},
        "trajectories": {"recorded": len(trajs), "recorded_now": result.recorded,
                         "abandoned_now": dict(result.abandoned), "abandon_details": result.abandon_details},
        "outcomes": {"compiled": compiled, "correct": len(correct), "first_turn_correct": first_ok,
                     "compiled_share": round(compiled / n, 4), "correct_share": round(len(correct) / n, 4),
                     "turns": sum(len(tr["turns"]) for tr in trajs),
                     "final_status": dict(Counter(tr.get("final_status") or "none" for tr in trajs)),
                     "stop_reasons": dict(Counter((tr.get("metadata") or {}).get("stop_reason") for tr in trajs)),
                     "per_turn": per_turn,
                     "best_speedup_geomean": (round(math.exp(sum(map(math.log, speedups)) / len(speedups)), 4)
                                              if speedups else None),
                     "speedup_platform": platform},
        "tokens": {**client_stats, "completion_tokens_recorded": recorded_tokens},
        "throughput": {"wall_s": round(wall_s, 2), "tasks_finished_now": result.tasks_finished,
                       "tasks_per_min": round(result.tasks_finished / minutes, 3),
                       "trajectories_per_min": round(result.recorded / minutes, 3),
                       "completion_tokens_per_s": round(generated / max(wall_s, 1e-9), 2),
                       "verifications": result.verifications, "verify_seconds": round(result.verify_seconds, 2),
                       "infra_errors": result.infra_errors, "infra_error_details": result.infra_error_details},
        "activity": result.activity,
        "stopped": result.stopped,
    }


class _Progress:
    """tqdm bar over trajectories with live counts (requests and verifications in flight,
    programs compiled and correct so far, trajectories with a correct program)."""

    def __init__(self, total: int, settings: GenSettings, enabled: bool) -> None:
        self.total, self.enabled = total, enabled
        self.label = f"gen {settings.agent.language} ({settings.model_name})"
        self.counts = Counter()

    def __enter__(self) -> "_Progress":
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, desc=self.label, unit="traj", disable=not self.enabled, file=sys.stderr)
        return self

    def event(self, kind: str, info: dict[str, Any]) -> None:
        c = self.counts
        if kind == "verdict" and info.get("kind") == "verify":  # kernels only (not seeds, functional programs)
            c["verified"] += 1
            c["compiled"] += bool(info.get("compiled"))
            c["ok"] += info.get("status") == "ok"
        elif kind == "done":
            c["solved"] += bool(info.get("ok"))
            c["abandoned"] += bool(info.get("abandoned"))
            self.bar.update(1)
        elif kind == "tick":
            c["gen"], c["verify"] = info["gen"], info["verify"]
        if kind != "reply":
            self.bar.set_postfix({k: c[k] for k in ("gen", "verify", "verified", "compiled", "ok", "solved", "abandoned")},
                                 refresh=False)

    def __exit__(self, *exc: Any) -> None:
        self.bar.close()
