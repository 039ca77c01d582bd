"""Dataset rows of every config kind, built from stored record dicts (`amdkv.data.schemas`).

One place turns evidence into rows, so every config states the evidence the same way:
`verdict_columns` (status, speedups, platform, `execution_verified`, `interpreter_verified`,
the exact verdict JSON) and `provenance_columns` (model, origin, licence, provenance).

The `messages` column is built with `amdkv.prompts`: the request a model sees for the task
(`build_messages` with the record's `PromptConfig`, or a trajectory's own prompt) and the answer as
an assistant message (the program in a fenced ```python block, the answer format the prompts
ask for). Messages are cached per (task, prompt config, stage) because a corpus holds many
samples of each task.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping

from amdkv.data.qa_prompt import QA_PROMPT_VERSION, qa_messages
from amdkv.data.records import is_gpu_platform, task_from_part
from amdkv.data.schemas import OPTIMISATION, ROCM_QA, SCHEMA_VERSIONS, TRANSLATION

Message = dict[str, Any]


def json_text(value: Any) -> str | None:
    """Exact JSON text of a free-form value (None stays None): floats round-trip bit for bit."""
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=True)


def answer_message(source: str) -> Message:
    """The assistant turn of a single-turn row: the program in one fenced block."""
    return {"role": "assistant", "content": f"```python\n{source.rstrip()}\n```", "reasoning_content": None}


def _with_reasoning_key(messages: list[Mapping[str, Any]]) -> list[Message]:
    return [{"role": m["role"], "content": m["content"], "reasoning_content": m.get("reasoning_content")}
            for m in messages]


def task_columns(task: Mapping[str, Any]) -> dict[str, Any]:
    return {"task_id": task["id"], "task_suite": task.get("suite"), "suite_version": task.get("suite_version"),
            "task_source": task["source"], "level": task.get("level"), "op_family": task.get("op_family"),
            "dtypes": list(task.get("dtypes") or [])}


def verdict_columns(verdict: Mapping[str, Any]) -> dict[str, Any]:
    platform = verdict.get("platform")
    ok = verdict.get("status") == "ok"
    return {"status": verdict.get("status"), "reason": verdict.get("reason"), "correct": verdict.get("correct"),
            "compiled": verdict.get("compiled"), "speedup": verdict.get("speedup"),
            "speedup_compile": verdict.get("speedup_compile"), "sol": verdict.get("sol"),
            "verdict": json_text(verdict), **evidence_columns(platform, verdict.get("device"),
                                                                ok and is_gpu_platform(platform),
                                                                bool(ok and verdict.get("interpreter_verified")))}


def evidence_columns(platform: str | None, device: str | None, execution_verified: bool,
                     interpreter_verified: bool) -> dict[str, Any]:
    return {"platform": platform, "device": device, "execution_verified": bool(execution_verified),
            "interpreter_verified": bool(interpreter_verified)}


def provenance_columns(record: Mapping[str, Any], cluster: str, *, model: str | None = None) -> dict[str, Any]:
    origin = record.get("origin") or {}
    return {"model": model if model is not None else origin.get("model"), "origin": json_text(origin),
            "licence": record.get("licence"), "provenance": record.get("provenance"), "cluster": cluster}


class MessageBuilder:
    """`messages` for tasks, with the prompts cached (see the module docstring)."""

    def __init__(self, cache_size: int = 4096) -> None:
        self._cached = functools.lru_cache(maxsize=cache_size)(self._build)
        self._tasks: dict[tuple[str, str], Mapping[str, Any]] = {}

    def prompt_config(self, language: str, origin: Mapping[str, Any] | None):  # -> PromptConfig
        """The record's `origin.prompt_config` (else the default) for `language`; made once per
        distinct value (a PromptConfig checks its template version when made)."""
        stored = (origin or {}).get("prompt_config")
        return self._config(language, json.dumps(stored, sort_keys=True) if stored else None)

    @staticmethod
    @functools.lru_cache(maxsize=256)
    def _config(language: str, stored: str | None):
        from amdkv.prompts.messages import PromptConfig

        if stored:
            return PromptConfig.from_dict({**json.loads(stored), "language": language})
        return PromptConfig(language=language)

    def request(self, task: Mapping[str, Any], language: str, origin: Mapping[str, Any] | None = None,
                *, stage: str = "write", previous: tuple[str, str] | None = None) -> tuple[list[Message], str]:
        """([system, user] messages, prompt version) for `task` at `stage`. `previous`: (program,
        verdict JSON text) shown by an `optimise` request (never cached: each pair's differs)."""
        config = self.prompt_config(language, origin)
        key = (task["id"], task["source_hash"])  # a task part is the same for every record of that task
        self._tasks.setdefault(key, task)
        build = self._build if previous is not None else self._cached
        return build(key, config, stage, previous), config.version

    def _build(self, key: tuple[str, str], config: Any, stage: str, previous: tuple[str, str] | None) -> list[Message]:
        from amdkv.prompts.messages import build_messages, feedback_for

        task = task_from_part(self._tasks[key])
        if previous is None:
            return _with_reasoning_key(build_messages(task, config, stage))
        code, verdict_text = previous
        feedback = feedback_for(config, verdict=json.loads(verdict_text))
        return _with_reasoning_key(build_messages(task, config, stage, previous_code=code, feedback=feedback))


def translation_row(record: Mapping[str, Any], *, uid: str, cluster: str, messages: MessageBuilder,
                    turn: int | None = None) -> dict[str, Any]:
    """A `torch2<lang>` row from a sample record, or from turn `turn` of a trajectory record (the
    trajectory's own first request, answered with that turn's program)."""
    task = record["task"]
    if turn is None:
        source, verdict = record["candidate"]["source"], record["verdict"]
        language = record["candidate"]["language"]
        request, version = messages.request(task, language, record.get("origin"))
        model, turn_index = None, (record.get("origin") or {}).get("turn")
    else:
        traj = record["trajectory"]
        step = traj["turns"][turn]
        source, verdict, language = step["code"], step["verdict"], traj["language"]
        request, version = _with_reasoning_key(traj["prompt"]), traj["prompt_version"]
        model, turn_index = traj.get("model"), turn
    return {"id": uid, "schema_version": SCHEMA_VERSIONS[TRANSLATION], **task_columns(task), "language": language,
            "kernel": source, "kernel_sha256": _sha256(source), "messages": request + [answer_message(source)],
            "prompt_version": version, **verdict_columns(verdict),
            "turn": turn_index if isinstance(turn_index, int) else None,
            **provenance_columns(record, cluster, model=model)}


def optimisation_row(before: tuple[Mapping[str, Any], int | None], after: tuple[Mapping[str, Any], int | None], *,
                     uid: str, before_id: str, after_id: str, pair_source: str, cluster: str,
                     messages: MessageBuilder) -> dict[str, Any]:
    """A `<lang>2<lang>` row: the `optimise` request showing the slower program and its verdict's
    feedback, answered with the faster program. Both are `ok` on the same platform."""
    (b_src, b_verdict, language), (a_src, a_verdict, _) = _program(*before), _program(*after)
    after_record = after[0]
    request, version = messages.request(after_record["task"], language, after_record.get("origin"), stage="optimise",
                                        previous=(b_src, json_text(b_verdict)))
    platform = a_verdict.get("platform")
    return {"id": uid, "schema_version": SCHEMA_VERSIONS[OPTIMISATION], **task_columns(after_record["task"]),
            "language": language, "kernel_before": b_src, "kernel_after": a_src, "before_id": before_id,
            "after_id": after_id, "speedup_before": b_verdict.get("speedup"), "speedup_after": a_verdict.get("speedup"),
            "gain": a_verdict["speedup"] / b_verdict["speedup"], "pair_source": pair_source,
            "messages": request + [answer_message(a_src)], "prompt_version": version,
            "verdict_before": json_text(b_verdict), "verdict_after": json_text(a_verdict),
            **evidence_columns(platform, a_verdict.get("device"), is_gpu_platform(platform), False),
            **provenance_columns(after_record, cluster, model=_model(*after))}


def _program(record: Mapping[str, Any], turn: int | None) -> tuple[str, dict[str, Any], str]:
    if turn is None:
        return record["candidate"]["source"], record["verdict"], record["candidate"]["language"]
    step = record["trajectory"]["turns"][turn]
    return step["code"], step["verdict"], record["trajectory"]["language"]


def _model(record: Mapping[str, Any], turn: int | None) -> str | None:
    return record["trajectory"].get("model") if turn is not None else (record.get("origin") or {}).get("model")


def trajectory_row(record: Mapping[str, Any], *, uid: str, cluster: str) -> dict[str, Any]:
    """A `trajectories` row: `Trajectory.to_row()` plus the task, the whole conversation as
    `messages`, the evidence and the provenance."""
    from amdkv.prompts.trajectory import Trajectory

    traj = Trajectory.from_record(record["trajectory"])
    verdicts = [t.verdict for t in traj.turns if t.verdict]
    platform = trajectory_platform(verdicts)
    gpu_ok = any(v.get("status") == "ok" and is_gpu_platform(v.get("platform")) for v in verdicts)
    cpu_ok = any(v.get("status") == "ok" and v.get("interpreter_verified") for v in verdicts)
    conversation = traj.messages() if traj.turns else traj.prompt
    row = {"id": uid, **traj.to_row(), **{k: v for k, v in task_columns(record["task"]).items() if k != "task_id"},
           "messages": _with_reasoning_key(conversation),
           **evidence_columns(platform, next((v.get("device") for v in verdicts), None), gpu_ok, cpu_ok),
           **{k: v for k, v in provenance_columns(record, cluster).items() if k != "model"}}
    return row


def trajectory_platform(verdicts: list[Mapping[str, Any]]) -> str | None:
    """The one platform of a trajectory's verdicts (None: none verified). Several platforms in one
    conversation would merge evidence of different machines: refused."""
    platforms = {v.get("platform") for v in verdicts}
    if len(platforms) > 1:
        from amdkv.errors import BadInputError

        raise BadInputError(f"a trajectory holds verdicts from several platforms {sorted(map(str, platforms))}",
                            hint="verify every turn of a trajectory on one platform")
    return platforms.pop() if platforms else None


def qa_row(record: Mapping[str, Any], *, uid: str, cluster: str) -> dict[str, Any]:
    qa = record["qa"]
    grounding = qa.get("grounding") or {}
    return {"id": uid, "schema_version": SCHEMA_VERSIONS[ROCM_QA], "question": qa["question"], "answer": qa["answer"],
            "library": qa["library"], "file": qa["file"], "line_start": qa["line_start"], "line_end": qa["line_end"],
            "commit": qa["commit"], "grounded": bool(grounding.get("grounded")), "grounding": json_text(grounding),
            "messages": qa_messages(qa["question"], qa["answer"]), "prompt_version": QA_PROMPT_VERSION,
            **evidence_columns(None, None, False, False), **provenance_columns(record, cluster)}


def _sha256(text: str) -> str:
    from amdkv.verify.candidate import source_sha256

    return source_sha256(text)

