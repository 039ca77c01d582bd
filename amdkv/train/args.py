"""Reading a training config: TRL's own config classes plus an `amdkv:` section.

A config file is one YAML mapping (docs/training.md, training_configs/):

    model_name_or_path: Qwen/Qwen3-8B        # trl.ModelConfig (model, dtype, attention, LoRA)
    learning_rate: 1.0e-6                    # trl.SFTConfig / trl.GRPOConfig (all of TRL's fields)
    env: {TOKENIZERS_PARALLELISM: "false"}   # environment variables, as TrlParser sets them
    amdkv:                                   # this module's dataclasses (AmdkvSFTArguments / AmdkvRLArguments)
      suite: builtin:train
      verifier: {url: http://127.0.0.1:8765}

TRL's fields go through `trl.TrlParser` (so the file sets defaults and `--learning_rate 1e-5`
on the command line overrides them, exactly as in TRL's own scripts); the `amdkv:` section is
read here, with nested sections, unknown keys refused with the list of known ones, and
command-line overrides `--amdkv.verifier.url http://...` (values read as YAML).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, Mapping, Sequence

from amdkv.errors import BadInputError
from amdkv.train.data import TRAJECTORY_TARGETS, CurriculumStage
from amdkv.train.reward import RewardWeights


@dataclasses.dataclass
class PromptArguments:
    """The prompt of every example (amdkv.prompts.PromptConfig)."""

    language: str = "triton"
    arch: str = "gfx942"
    shots: int = 1
    system_prompt: bool = True   # False: no system message (models trained from scratch; docs/training.md)

    def prompt_config(self):
        from amdkv.prompts.messages import PromptConfig

        return PromptConfig(language=self.language, arch=self.arch, shots=self.shots)


@dataclasses.dataclass
class AmdkvSFTArguments(PromptArguments):
    """`amdkv:` section of an SFT config. Exactly one data source: `dataset` (a corpus folder, Hub
    id or .jsonl/.parquet file, with `dataset_config`: `default`, `trajectories`, ...) or
    `reference_solutions` (a task suite whose reference solutions become the replies)."""

    dataset: str | None = None
    dataset_config: str | None = None
    dataset_split: str = "train"
    reference_solutions: str | None = None
    trajectory_target: str = "best_turn"
    reasoning: bool = True
    max_examples: int | None = None
    tiny_model: str | None = None      # a preset of amdkv.train.tiny_model instead of model_name_or_path

    def __post_init__(self) -> None:
        if self.trajectory_target not in TRAJECTORY_TARGETS:
            raise BadInputError(f"amdkv.trajectory_target={self.trajectory_target!r}",
                                hint=f"use one of {', '.join(TRAJECTORY_TARGETS)}")


@dataclasses.dataclass
class VerifierArguments:
    """Where rewards are verified. `url`: an `amdkv serve` service (one per node, shared by every
    rank, on GPUs the trainer does not use) through RemoteVerifier; None: a local verifier in each
    trainer process (its workers are separate processes), for single-process and CPU runs and a
    correctness-only reward sharing one GPU. `timeout_s` bounds every wait for a verdict, so a
    dead or hung verifier is noticed within it; `retries`: transport retries of the client."""

    url: str | None = None
    token_env: str = "AMDKV_SERVE_TOKEN"
    timeout_s: float = 120.0
    retries: int = 3
    device: str = "auto"
    jobs: int = 4
    trials: int | None = None
    time_performance: bool = False
    archs: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class InfraArguments:
    """When the verifier's failures stop the run (reward.InfraErrorGuard); `retries`: re-verifications
    of an infra_error before it counts."""

    max_rate: float = 0.02
    allowance: int = 2
    max_step_rate: float = 0.25
    retries: int = 1


@dataclasses.dataclass
class AuditArguments:
    """The reward-hacking audit (reward.RewardAudit). `every_steps` 0: off. The audit verifier is
    the reward's with `trials` seeded trials and `time_performance` (performance-case shapes on
    GPU platforms); with a remote reward verifier, `url` names a second service started with those
    settings (e.g. AMDKV_TRIALS=9), else the audit is off."""

    every_steps: int = 0
    top_k: int = 4
    trials: int = 9
    time_performance: bool = True
    url: str | None = None


@dataclasses.dataclass
class AmdkvRLArguments(PromptArguments):
    """`amdkv:` section of an RL config (docs/training.md)."""

    suite: str = "builtin:train"
    max_tasks: int | None = None
    curriculum: list[CurriculumStage] | None = None
    target_platform: str = "rocm"
    reward: RewardWeights = dataclasses.field(default_factory=RewardWeights)
    verifier: VerifierArguments = dataclasses.field(default_factory=VerifierArguments)
    infra: InfraArguments = dataclasses.field(default_factory=InfraArguments)
    audit: AuditArguments = dataclasses.field(default_factory=AuditArguments)
    max_turns: int = 1
    continue_after_correct: bool = False
    gamma: float = 0.6
    shuffle_rewards: bool = False
    reward_log: bool = False           # every reward call as a JSON line: output_dir/amdkv_rewards.rank<N>.jsonl
    tiny_model: str | None = None

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise BadInputError(f"amdkv.max_turns={self.max_turns}", hint="1 = single-turn GRPO; more = multi-turn")
        if self.target_platform not in ("rocm", "cuda", "cpu", "none"):
            raise BadInputError(f"amdkv.target_platform={self.target_platform!r}",
                                hint="rocm (MI300X, the default), cuda, cpu or none (no speed term)")


# ------------------------------------------------------------------------------------------ reading
def from_mapping(cls: type, data: Mapping[str, Any] | None, where: str = "amdkv") -> Any:
    """`cls` from a (YAML) mapping, nested dataclasses and curriculum stages included; unknown
    keys are refused with the known ones in the hint."""
    if data is None:
        return cls()
    if dataclasses.is_dataclass(data) and isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise BadInputError(f"{where} must be a mapping, not {type(data).__name__}", hint=f"e.g. {where}: {{...}}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise BadInputError(f"unknown key(s) {unknown} in {where}", hint=f"known keys: {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        values[name] = _convert(hints[name], value, f"{where}.{name}")
    return cls(**values)


def _convert(hint: Any, value: Any, where: str) -> Any:
    if value is None:
        return None
    target = _unwrap_optional(hint)
    if dataclasses.is_dataclass(target):
        return from_mapping(target, value, where)
    if typing.get_origin(target) is list:
        (item,) = typing.get_args(target) or (Any,)
        if not isinstance(value, (list, tuple)):
            value = [value]
        if item is CurriculumStage:
            return [CurriculumStage.from_mapping(v) for v in value]
        return list(value)
    if target in (int, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return target(value)
    if target in (bool, int, float, str) and not isinstance(value, target):
        raise BadInputError(f"{where}={value!r} should be {target.__name__}", hint="fix the value in the config")
    return value


def _unwrap_optional(hint: Any) -> Any:
    """`X | None` -> X (other hints unchanged)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def split_overrides(argv: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Take `--amdkv.a.b VALUE` / `--amdkv.a.b=VALUE` out of argv: (the rest, nested overrides)."""
    import yaml

    rest: list[str] = []
    overrides: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("--amdkv."):
            rest.append(arg)
            continue
        key, eq, value = arg[len("--amdkv."):].partition("=")
        if not eq:
            if i >= len(argv):
                raise BadInputError(f"{arg} needs a value", hint=f"{arg} VALUE or {arg}=VALUE")
            value, i = argv[i], i + 1
        node = overrides
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return rest, overrides


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        nested = isinstance(v, Mapping) and isinstance(out.get(k), (Mapping, type(None)))
        out[k] = _merge(out.get(k) or {}, v) if nested else v
    return out


def parse_config(trl_config_cls: type, amdkv_cls: type, argv: Sequence[str] | None = None):
    """(TRL config, trl.ModelConfig, amdkv arguments) from `--config FILE` and the command line."""
    import sys

    import yaml
    from trl import ModelConfig, TrlParser

    args = list(sys.argv[1:] if argv is None else argv)
    args, overrides = split_overrides(args)
    config: dict[str, Any] = {}
    if "--config" in args:
        i = args.index("--config")
        if i + 1 >= len(args):
            raise BadInputError("--config needs a file", hint="--config training_configs/sft_qwen3_8b.yaml")
        path = Path(args[i + 1])
        del args[i:i + 2]
        if not path.is_file():
            raise BadInputError(f"config file {path} does not exist", hint="see training_configs/ for examples")
        config = yaml.safe_load(path.read_text()) or {}
        if not isinstance(config, dict):
            raise BadInputError(f"{path} must hold a YAML mapping", hint="key: value lines at the top level")
    for key, value in (config.pop("env", None) or {}).items():
        os.environ.setdefault(str(key), str(value))  # the environment a job was started with wins
    section = _merge(config.pop("amdkv", None) or {}, overrides)
    amdkv_args = from_mapping(amdkv_cls, section)
    parser = TrlParser((trl_config_cls, ModelConfig))
    unknown = parser.set_defaults_with_config(**config)
    if unknown:
        raise BadInputError(f"unknown config keys {unknown[::2]}",
                            hint=f"top-level keys are {trl_config_cls.__name__} and trl.ModelConfig fields; "
                                 "amdkv's own go under `amdkv:`")
    trl_args, model_args = parser.parse_args_into_dataclasses(args=args)
    return trl_args, model_args, amdkv_args
