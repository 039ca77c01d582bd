"""Chat messages for a task and a stage: the one builder that generation, datasets and training use.

    cfg = PromptConfig(language="triton", arch="gfx942")
    messages = build_messages(task, cfg)                          # [system, user]: the `write` request
    fb = feedback_for(cfg, verdict=verdict)                       # after a turn: Feedback(stage, content)
    messages += [{"role": "assistant", "content": reply}, fb.message]   # multi-turn: append and go on
    repair = build_messages(task, cfg, stage=fb.stage, previous_code=code, feedback=fb)  # single-turn variant

Messages are plain dicts (`role`, `content`), what OpenAI-compatible servers, `datasets` and
TRL's chat templates all take. Few-shot examples are part of the first user message, never
assistant turns: an SFT loss on assistant tokens must not train on them, and the RL prompt stays
one system and one user message.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

from amdkv.errors import BadInputError
from amdkv.prompts import templates
from amdkv.prompts.benchmark import INSTRUCTION_STYLES, benchmark_message
from amdkv.prompts.extract import Extraction, language_name
from amdkv.prompts.feedback import DEFAULT_MAX_LOG_CHARS, Feedback, extraction_feedback, verdict_feedback
from amdkv.prompts.fewshot import select_examples
from amdkv.prompts.rules import rule_fields
from amdkv.prompts.stages import FIX_FORMAT, WRITE, check_stage
from amdkv.prompts.target import DEFAULT_ARCH, target_facts, template_fields
from amdkv.tasks.types import Task

LANGUAGES = ("triton", "hip")


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    """Everything that decides the text of a prompt besides the task and the turn's outcome.

    Recorded with every trajectory (`to_dict`), so a prompt can be rendered again exactly.
    `instruction_style`: which of a benchmark's instruction styles the `write` request of a
    TritonBench-G task shows (`simp` or `comp`; None: `comp` when the task has it, else `simp`);
    other tasks ignore it (amdkv.prompts.benchmark)."""

    language: str = "triton"
    arch: str = DEFAULT_ARCH
    shots: int = 1
    version: str = templates.PROMPT_VERSION
    max_log_chars: int = DEFAULT_MAX_LOG_CHARS
    instruction_style: str | None = None

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise BadInputError(f"unknown language {self.language!r}", hint=f"use one of {', '.join(LANGUAGES)}")
        target_facts(self.arch)  # raises for an unknown arch
        templates.fingerprint(self.version)  # raises for an unknown version
        if self.shots < 0 or self.max_log_chars < 200:
            raise BadInputError(f"shots={self.shots}, max_log_chars={self.max_log_chars}",
                                hint="shots must be >= 0 and max_log_chars >= 200")
        if self.instruction_style not in (None, *INSTRUCTION_STYLES):
            raise BadInputError(f"unknown instruction_style {self.instruction_style!r}",
                                hint=f"use one of {', '.join(INSTRUCTION_STYLES)}, or None for the benchmark's fullest")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if d["instruction_style"] is None:  # as configs recorded before the field: run identities stay the same
            del d["instruction_style"]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PromptConfig":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


def system_message(config: PromptConfig) -> dict[str, str]:
    """The system message: role, the AMD target, how to write the language for it, the verifier's
    rules, how programs are judged and the answer format."""
    return {"role": "system", "content": _system_content(config)}


@functools.lru_cache(maxsize=32)
def _system_content(config: PromptConfig) -> str:
    v = config.version
    facts = template_fields(target_facts(config.arch))
    common = {**facts, "language_name": language_name(config.language)}
    content = templates.render(
        "system", v, **common,
        target=templates.render("target", v, **facts).strip(),
        language_guide=templates.render(config.language, v, **common).strip(),
        rules=templates.render("rules", v, **rule_fields(config.language)).strip(),
        judging=templates.render("judging", v).strip(),
        answer_format=templates.render("answer", v).strip())
    return content


def _task_notes(task: Task) -> str:
    notes = []
    if task.dtypes:
        notes.append(f"Input dtypes: {', '.join(task.dtypes)}.")
    if task.comparator not in ("default", None):
        notes.append(f"Outputs are compared with the `{task.comparator}` comparator.")
    return (" ".join(notes) + "\n") if notes else ""


def task_message(task: Task, config: PromptConfig) -> dict[str, str]:
    """The first user message (stage `write`): few-shot examples from `builtin:train`, then the task;
    for a task loaded from an external benchmark, that benchmark's own instructions instead
    (`amdkv.prompts.benchmark`)."""
    own = benchmark_message(task, config)
    if own is not None:
        return {"role": "user", "content": own}
    v = config.version
    examples = "".join(
        templates.render("example", v, example_id=e.task_id, example_task=e.task_source.strip(),
                         example_solution=e.solution.strip(), language_name=language_name(config.language)) + "\n"
        for e in select_examples(task, config.language, config.shots))
    content = templates.render("write", v, examples=examples, task_id=task.id, task_source=task.source.strip(),
                               task_notes=_task_notes(task), language_name=language_name(config.language),
                               arch=target_facts(config.arch).name)
    return {"role": "user", "content": content}


def feedback_for(config: PromptConfig, *, verdict: Mapping[str, Any] | Any = None,
                 extraction: Extraction | None = None) -> Feedback:
    """The feedback after a turn: from the failed `extraction` when no program was taken, else
    from the program's `verdict` (a `Verdict` or its dict)."""
    if extraction is not None and not extraction.ok:
        return extraction_feedback(extraction, version=config.version)
    if verdict is None:
        raise BadInputError("feedback needs the verdict of the extracted program (or a failed extraction)",
                            hint="feedback_for(config, verdict=v) or feedback_for(config, extraction=e)")
    return verdict_feedback(verdict, language=config.language, arch=config.arch, version=config.version,
                            max_log_chars=config.max_log_chars)


def build_messages(task: Task, config: PromptConfig, stage: str = WRITE, *, previous_code: str | None = None,
                   feedback: Feedback | None = None) -> list[dict[str, str]]:
    """`[system, user]` for `task` at `stage`.

    `write`: the task (with examples). Any other stage is the single-turn form of that request:
    the task, the previous program and the feedback in one user message (for agents that restart
    the context and for repair datasets); `feedback.stage` must equal `stage`. Multi-turn
    conversations instead append the assistant reply and `feedback.message` (see `Trajectory`)."""
    check_stage(stage)
    first = task_message(task, config)
    if stage == WRITE:
        return [system_message(config), first]
    if feedback is None or feedback.stage != stage:
        raise BadInputError(f"stage {stage!r} needs the feedback that leads to it",
                            hint="pass feedback=feedback_for(config, verdict=...) whose .stage is this stage")
    if stage == FIX_FORMAT:  # there was no program: show the task and why the reply was unusable
        content = templates.render("retry", config.version, task_message=first["content"].strip(),
                                   feedback=feedback.content.strip())
    elif previous_code is None:
        raise BadInputError(f"stage {stage!r} shows the previous program: pass previous_code=",
                            hint="the program the verdict is about")
    else:
        content = templates.render("previous", config.version, task_message=first["content"].strip(),
                                   previous_code=previous_code.strip(), feedback=feedback.content.strip())
    return [system_message(config), {"role": "user", "content": content}]
