"""Training data in TRL's formats, from what the corpora and task suites hold.

SFT (`sft_dataset`): any `datasets.Dataset` with
- a `messages` column (conversational language modelling, the corpora's `message_features()`):
  kept as is, trained with `assistant_only_loss` (every assistant turn,
  never the prompt or the feedback);
- `prompt` + `completion` columns: kept (completion-only loss);
- the `trajectories` config's rows (`Trajectory.to_row()`): converted by `Trajectory.to_sft_example`,
  with `trajectory_target` = `best_turn` (default: the conversation up to its best correct turn,
  every assistant turn trained; trajectories with no correct turn are dropped: SFT imitates what
  worked), `all_turns` (the whole conversation) or `last_turn` (prompt-completion, the last reply
  only).
Or from the reference solutions of a task suite (`reference_solution_examples`): the `write`
prompt of `amdkv.prompts.build_messages` and one reply holding the solution in a ```python block,
as prompt-completion rows (the learning experiment and CI use the procedural/builtin solutions).

RL (`rl_prompt_dataset`): one row per prompt from `rl_prompt_row(task, config)` (`prompt`,
`prompt_key`, `task_id`, `language`, `arch`, `prompt_version`) plus the task's `level`,
`op_family`, `suite` and `split` as extra columns (TRL hands every column to reward functions),
ordered by an optional level curriculum (`Curriculum`).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from amdkv.errors import BadInputError
from amdkv.prompts.trajectory import Trajectory, prompt_key, rl_prompt_row

if TYPE_CHECKING:
    from datasets import Dataset

    from amdkv.prompts.messages import PromptConfig
    from amdkv.tasks.types import Task

TRAJECTORY_TARGETS = ("best_turn", "all_turns", "last_turn")


# ------------------------------------------------------------------------------------------ SFT
def sft_format(column_names: Iterable[str]) -> str:
    """`trajectories`, `messages` or `prompt_completion`: which input format a dataset has."""
    cols = set(column_names)
    if {"turns", "prompt", "task_id"} <= cols:
        return "trajectories"
    if "messages" in cols:
        return "messages"
    if {"prompt", "completion"} <= cols:
        return "prompt_completion"
    raise BadInputError(f"cannot make SFT data from columns {sorted(cols)}",
                        hint="give a dataset with `messages`, `prompt` + `completion`, or the `trajectories` "
                             "config (Trajectory.to_row rows)")


def trajectory_sft_example(row: Mapping[str, Any], target: str = "best_turn",
                           reasoning: bool = True) -> dict[str, list] | None:
    """One `trajectories` row as an SFT example, or None when `best_turn` finds no correct turn."""
    if target not in TRAJECTORY_TARGETS:
        raise BadInputError(f"unknown trajectory_target {target!r}", hint=f"use one of {', '.join(TRAJECTORY_TARGETS)}")
    traj = Trajectory.from_record(row)
    if not traj.turns:
        return None
    if target == "best_turn":
        best = traj.best_turn()
        if best is None:
            return None
        return traj.to_sft_example(through_turn=best, target="all_turns", reasoning=reasoning)
    return traj.to_sft_example(target=target, reasoning=reasoning)


def sft_dataset(dataset: "Dataset", *, trajectory_target: str = "best_turn", reasoning: bool = True,
                max_examples: int | None = None) -> "Dataset":
    """`dataset` in TRL's SFT format (see the module docstring); the other columns are dropped."""
    from datasets import Dataset

    kind = sft_format(dataset.column_names)
    if kind == "trajectories":
        rows = (trajectory_sft_example(r, trajectory_target, reasoning) for r in dataset)
        out = Dataset.from_list([r for r in rows if r is not None])
    else:
        out = dataset.select_columns(["messages"] if kind == "messages" else ["prompt", "completion"])
    if len(out) == 0:
        raise BadInputError(f"no SFT examples in this {kind} dataset ({len(dataset)} rows)",
                            hint="with trajectories, `best_turn` keeps only those with a correct turn: "
                                 "try trajectory_target=all_turns")
    return out.select(range(min(max_examples, len(out)))) if max_examples else out


def reference_solution(task: "Task", language: str = "triton") -> str | None:
    """The task's reference solution text: METADATA["solutions"][language] (a path relative to the
    task file, as procedural tasks give it), else the bundled solution of a builtin task."""
    rel = (task.metadata.get("solutions") or {}).get(language)
    if rel:
        path = (Path(task.path).parent / rel).resolve()
        return path.read_text(encoding="utf-8") if path.is_file() else None
    from amdkv.tasks.builtin import solution_path

    path = solution_path(task.id, language)
    return path.read_text(encoding="utf-8") if path is not None else None


def solution_reply(solution: str) -> str:
    """The assistant reply that SFT on a reference solution teaches: the program in one block."""
    return f"```python\n{solution.rstrip()}\n```"


def prompt_messages(task: "Task", config: "PromptConfig", system_prompt: bool = True) -> list[dict[str, str]]:
    """The `write` request of `build_messages`; `system_prompt=False` leaves the system message
    out (a model trained from scratch cannot use its ~2.3 k constant tokens; see docs/training.md)."""
    from amdkv.prompts.messages import build_messages

    messages = build_messages(task, config)
    return messages if system_prompt else without_system(messages)


def without_system(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [dict(m) for m in messages if m["role"] != "system"]


def reference_solution_examples(tasks: Sequence["Task"], config: "PromptConfig",
                                system_prompt: bool = True) -> list[dict[str, list]]:
    """Prompt-completion SFT rows: each task's `write` prompt and its reference solution as the reply
    (tasks without a solution in `config.language` are skipped)."""
    rows = []
    for task in tasks:
        solution = reference_solution(task, config.language)
        if solution is None:
            continue
        rows.append({"prompt": prompt_messages(task, config, system_prompt),
                     "completion": [{"role": "assistant", "content": solution_reply(solution)}]})
    if not rows:
        raise BadInputError(f"none of the {len(tasks)} tasks has a {config.language} reference solution",
                            hint="pick a suite with solutions (builtin:train, procedural:train)")
    return rows


def load_sft_source(dataset: str | None = None, *, dataset_config: str | None = None, split: str = "train",
                    reference_solutions: str | None = None, prompt_config: "PromptConfig | None" = None,
                    system_prompt: bool = True, trajectory_target: str = "best_turn", reasoning: bool = True,
                    max_examples: int | None = None) -> "Dataset":
    """The SFT dataset a config names: `dataset` (a folder `load_dataset` reads, a Hub id, or a
    .jsonl/.parquet file) with `dataset_config`, or the `reference_solutions` of a task suite."""
    from datasets import Dataset

    if (dataset is None) == (reference_solutions is None):
        raise BadInputError("name exactly one SFT data source",
                            hint="amdkv.dataset (a corpus folder or Hub id) or amdkv.reference_solutions (a suite)")
    if reference_solutions is not None:
        from amdkv.prompts.messages import PromptConfig
        from amdkv.tasks.suites import load_suite

        rows = reference_solution_examples(load_suite(reference_solutions), prompt_config or PromptConfig(),
                                           system_prompt)
        return Dataset.from_list(rows[:max_examples] if max_examples else rows)
    return sft_dataset(_load(dataset, dataset_config, split), trajectory_target=trajectory_target,
                       reasoning=reasoning, max_examples=max_examples)


def _load(name: str, config: str | None, split: str) -> "Dataset":
    from datasets import load_dataset

    suffix = Path(name).suffix
    if suffix in (".jsonl", ".json", ".parquet") and Path(name).is_file():
        return load_dataset("json" if suffix != ".parquet" else "parquet", data_files=name, split=split)
    return load_dataset(name, config, split=split)


# ------------------------------------------------------------------------------------------ RL
@dataclasses.dataclass(frozen=True)
class CurriculumStage:
    """`prompts` prompts drawn from the tasks whose level is in `levels` (None: every level)."""

    levels: tuple[int, ...] | None
    prompts: int

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> "CurriculumStage":
        unknown = set(d) - {"levels", "prompts"}
        if unknown or "prompts" not in d:
            raise BadInputError(f"curriculum stage {dict(d)!r}",
                                hint="each stage is {levels: [1, 2], prompts: 512} (levels optional)")
        levels = d.get("levels")
        levels = (levels,) if isinstance(levels, int) else (tuple(int(x) for x in levels) if levels else None)
        prompts = int(d["prompts"])
        if prompts < 1:
            raise BadInputError(f"curriculum stage with prompts={prompts}", hint="prompts must be >= 1")
        return cls(levels, prompts)


def curriculum_order(tasks: Sequence["Task"], stages: Sequence[CurriculumStage], seed: int = 0) -> list["Task"]:
    """The prompt order of a curriculum: stage after stage, each a seeded shuffle of its tasks,
    repeated (reshuffled each pass) until it has `prompts` prompts. Deterministic, so a resumed
    run sees the same order (TRL's sampler must not shuffle it: shuffle_dataset=False)."""
    rng = random.Random(seed)
    order: list[Task] = []
    for k, stage in enumerate(stages):
        pool = [t for t in tasks if stage.levels is None or t.level in stage.levels]
        if not pool:
            have = sorted({t.level for t in tasks}, key=lambda x: (x is None, x))
            raise BadInputError(f"curriculum stage {k} asks for levels {list(stage.levels or [])}; "
                                f"the suite has levels {have}", hint="change the stage's levels or the suite")
        drawn: list[Task] = []
        while len(drawn) < stage.prompts:
            batch = sorted(pool, key=lambda t: t.id)
            rng.shuffle(batch)
            drawn += batch
        order += drawn[:stage.prompts]
    return order


def rl_prompt_rows(tasks: Sequence["Task"], config: "PromptConfig", system_prompt: bool = True) -> list[dict[str, Any]]:
    """One GRPO row per task: `rl_prompt_row` plus level, op_family, suite and split
    (`system_prompt=False`: without the system message, `prompt_key` computed on what is left)."""
    rows = []
    cache: dict[str, dict[str, Any]] = {}
    for task in tasks:
        if task.id not in cache:
            row = rl_prompt_row(task, config)
            if not system_prompt:
                row["prompt"] = without_system(row["prompt"])
                row["prompt_key"] = prompt_key(row["prompt"])
            cache[task.id] = {**row, "level": task.level if task.level is not None else -1,
                              "op_family": task.op_family, "suite": task.suite, "split": task.split or ""}
        rows.append(dict(cache[task.id]))
    return rows


def rl_prompt_dataset(tasks: Sequence["Task"], config: "PromptConfig",
                      curriculum: Sequence[CurriculumStage] | None = None, seed: int = 0,
                      system_prompt: bool = True) -> "Dataset":
    """The GRPO train dataset: one row per task, or per curriculum prompt, in curriculum order."""
    from datasets import Dataset

    if not tasks:
        raise BadInputError("no tasks for RL prompts", hint="check amdkv.suite")
    ordered = curriculum_order(tasks, curriculum, seed) if curriculum else list(tasks)
    return Dataset.from_list(rl_prompt_rows(ordered, config, system_prompt))


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | Path) -> Path:
    """Rows as JSON lines (what `load_sft_source` reads back as a .jsonl dataset)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path
