"""One multi-turn attempt at a task, in one representation used unchanged by records, SFT data and RL.

A `Trajectory` is one growing conversation: the first request (`prompt`: system + user, built by
`build_messages`), then per turn the model's reply (answer and reasoning kept apart), the program
taken from it, its verdict, the feedback built from that outcome (shown as the next request),
token counts and the turn's reward. Turn t is asked with `request(t)` = prompt + every earlier
(assistant reply, feedback) pair, so nothing is stored twice. An agent that restarts the context
starts a new Trajectory (`metadata["parent_id"]`).

Conversions (docs/trajectories.md):
- `to_record()` / `from_record()`: a JSON-able dict for the record store; `to_row()`: the same
  with free-form parts as JSON text, a `datasets` row (`features()`), read back by `from_record`;
- `to_sft_example()`: TRL conversational SFT data (`messages`, assistant-only loss), or the
  prompt-completion form that trains only the last turn;
- `to_rl_row()` / `rl_prompt_row()`: a GRPO dataset row (`prompt` + task id and config columns +
  `prompt_key`, which TRL's `rollout_func` uses to find the row, since it receives only prompts);
- `amdkv.prompts.chat_tokens.rollout_tokens()`: prompt ids, completion ids and the `env_mask`
  that hides feedback tokens, the shape TRL's `rollout_func` returns.

Rewards: each turn carries its scalar `reward` r_t (None: unscorable, e.g. `unverifiable`) and
named `reward_parts`; the trajectory's reward is the discounted return from its first turn,
G_0 = sum_t gamma^t r_t (see `discounted_returns`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import uuid
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

from amdkv.errors import BadInputError
from amdkv.prompts.extract import EXTRACTION_REASONS, OK as EXTRACTED, Extraction
from amdkv.prompts.stages import STAGES

if TYPE_CHECKING:
    from amdkv.prompts.messages import PromptConfig
    from amdkv.tasks.types import Task

TRAJECTORY_SCHEMA_VERSION = 1
DEFAULT_GAMMA = 0.6  # DESIGN.md section 6

Message = dict[str, Any]


@dataclasses.dataclass
class Turn:
    """One request and its outcome.

    `stage`: what the request asked (amdkv.prompts.stages). `reply`: the model's answer without
    its reasoning; `reasoning`: the think block's text (None: the model gave none). `code`: the
    program taken from the reply (None when `extraction` is not "ok"). `verdict`: the program's
    `Verdict.to_dict()` (None when nothing was verified). `feedback`: the user message built from
    this outcome, shown as the next turn's request (None: not built, e.g. the last turn).
    `completion_ids`/`logprobs`: the sampled tokens of the reply, when the generator returned
    them (exact on-policy tokens for RL; otherwise the text is tokenised)."""

    stage: str
    reply: str
    reasoning: str | None = None
    code: str | None = None
    extraction: str = EXTRACTED
    verdict: dict[str, Any] | None = None
    feedback: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reward: float | None = None
    reward_parts: dict[str, float] = dataclasses.field(default_factory=dict)
    completion_ids: list[int] | None = None
    logprobs: list[float] | None = None

    @classmethod
    def from_extraction(cls, stage: str, extraction: Extraction, *, reasoning: str | None = None,
                        **fields: Any) -> "Turn":
        """A turn from `extract_code`'s result. `reasoning`: the server's separate reasoning text
        (vLLM/SGLang reasoning parsers), used when the reply itself had no think block."""
        return cls(stage=stage, reply=extraction.answer, reasoning=extraction.reasoning if reasoning is None else reasoning,
                   code=extraction.code, extraction=extraction.reason, **fields)

    @property
    def status(self) -> str | None:
        """The verdict status, or `extraction:<reason>` when no program was taken."""
        if self.extraction != EXTRACTED:
            return f"extraction:{self.extraction}"
        return self.verdict.get("status") if self.verdict else None

    def assistant_message(self, *, reasoning: bool = True) -> Message:
        msg: Message = {"role": "assistant", "content": self.reply}
        if reasoning and self.reasoning is not None:
            msg["reasoning_content"] = self.reasoning
        return msg

    def check(self, index: int) -> None:
        where = f"turn {index}"
        if self.stage not in STAGES:
            raise BadInputError(f"{where}: unknown stage {self.stage!r}", hint=f"stages: {', '.join(STAGES)}")
        if self.extraction not in EXTRACTION_REASONS:
            raise BadInputError(f"{where}: unknown extraction reason {self.extraction!r}",
                                hint=f"reasons: {', '.join(EXTRACTION_REASONS)}")
        if (self.code is None) != (self.extraction != EXTRACTED):
            raise BadInputError(f"{where}: code must be present exactly when extraction is 'ok'",
                                hint="build turns with Turn.from_extraction(stage, extract_code(reply))")
        if self.code is None and self.verdict is not None:
            raise BadInputError(f"{where}: a verdict without a program", hint="verify only extracted programs")
        if self.reward is not None and not math.isfinite(self.reward):
            raise BadInputError(f"{where}: reward {self.reward!r} is not a finite number",
                                hint="use None for a turn that cannot be scored")
        if self.completion_ids is not None and self.logprobs is not None and \
                len(self.completion_ids) != len(self.logprobs):
            raise BadInputError(f"{where}: {len(self.completion_ids)} completion ids but {len(self.logprobs)} logprobs",
                                hint="one logprob per sampled token")


@dataclasses.dataclass
class Trajectory:
    """One attempt: the first request and its turns (see the module docstring)."""

    task_id: str
    language: str
    arch: str
    prompt_version: str
    prompt: list[Message]
    turns: list[Turn] = dataclasses.field(default_factory=list)
    model: str | None = None
    gamma: float = DEFAULT_GAMMA
    trajectory_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)
    schema_version: int = TRAJECTORY_SCHEMA_VERSION

    # ------------------------------------------------------------------ building
    @classmethod
    def start(cls, task: "Task", config: "PromptConfig", *, model: str | None = None, gamma: float = DEFAULT_GAMMA,
              **metadata: Any) -> "Trajectory":
        """A new trajectory whose prompt is `build_messages(task, config)` (stage `write`)."""
        from amdkv.prompts.messages import build_messages

        meta = {"prompt_config": config.to_dict(), **metadata}
        return cls(task_id=task.id, language=config.language, arch=config.arch, prompt_version=config.version,
                   prompt=build_messages(task, config), model=model, gamma=gamma, metadata=meta)

    def request(self, turn: int | None = None, *, reasoning: bool = True) -> list[Message]:
        """The messages sent to the model for turn `turn` (default: the next one): the prompt and
        every earlier reply with the feedback that followed it. `reasoning=False` leaves earlier
        think blocks out (what a server with Qwen3's stock template would show the model anyway)."""
        t = len(self.turns) if turn is None else turn
        if not 0 <= t <= len(self.turns):
            raise BadInputError(f"turn {t} does not exist (the trajectory has {len(self.turns)} turns)",
                                hint="request(t) takes 0 <= t <= len(turns)")
        messages = [dict(m) for m in self.prompt]
        for k, turn_k in enumerate(self.turns[:t]):
            if turn_k.feedback is None:
                raise BadInputError(f"turn {k} has no feedback, so turn {k + 1} was never asked",
                                    hint="set turns[k].feedback = feedback_for(...).content before the next turn")
            messages += [turn_k.assistant_message(reasoning=reasoning), {"role": "user", "content": turn_k.feedback}]
        return messages

    def messages(self, *, through_turn: int | None = None, reasoning: bool = True) -> list[Message]:
        """The conversation up to and including the reply of `through_turn` (default: the last),
        ending on an assistant message. `reasoning=False` leaves the think blocks out."""
        last = len(self.turns) - 1 if through_turn is None else through_turn
        if not 0 <= last < len(self.turns):
            raise BadInputError(f"through_turn={through_turn} but the trajectory has {len(self.turns)} turns",
                                hint="use 0 <= through_turn < len(turns)")
        return self.request(last, reasoning=reasoning) + [self.turns[last].assistant_message(reasoning=reasoning)]

    def check(self) -> "Trajectory":
        """Structural checks (raises BadInputError); returns self."""
        if self.schema_version != TRAJECTORY_SCHEMA_VERSION:
            raise BadInputError(f"trajectory schema version {self.schema_version}, this amdkv reads "
                                f"{TRAJECTORY_SCHEMA_VERSION}", hint="convert the record or use a matching amdkv")
        if not self.prompt or self.prompt[-1].get("role") != "user":
            raise BadInputError("a trajectory's prompt must end with a user message",
                                hint="use build_messages(task, config) or Trajectory.start")
        _check_gamma(self.gamma)
        for k, turn in enumerate(self.turns):
            turn.check(k)
            if k < len(self.turns) - 1 and turn.feedback is None:
                raise BadInputError(f"turn {k} has no feedback but turn {k + 1} follows it",
                                    hint="every turn but the last must carry the feedback that was shown")
        return self

    # ------------------------------------------------------------------ rewards
    def turn_rewards(self) -> list[float | None]:
        return [t.reward for t in self.turns]

    def returns(self) -> list[float | None]:
        """G_t for every turn (see `discounted_returns`)."""
        return discounted_returns(self.turn_rewards(), self.gamma)

    @property
    def trajectory_return(self) -> float | None:
        """G_0 = sum_t gamma^t r_t: the scalar reward of the whole trajectory (None if unscorable)."""
        returns = self.returns()
        return returns[0] if returns else None

    def best_turn(self) -> int | None:
        """The turn with the best correct program: `ok` verdicts ranked by speedup (None counts as
        1.0), the earliest on ties; None when no turn is correct."""
        best, best_key = None, None
        for k, t in enumerate(self.turns):
            if t.verdict and t.verdict.get("status") == "ok":
                key = t.verdict.get("speedup") or 1.0
                if best_key is None or key > best_key:
                    best, best_key = k, key
        return best

    # ------------------------------------------------------------------ records
    def to_record(self) -> dict[str, Any]:
        """A JSON-able dict for the record store and the `trajectories` dataset config (`features()`).

        `final_status` and `return` are derived (for filtering) and ignored by `from_record`."""
        self.check()
        record = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("turns", "prompt")}
        record["prompt"] = [{"role": m["role"], "content": m["content"]} for m in self.prompt]
        record["turns"] = [dataclasses.asdict(t) for t in self.turns]
        record["final_status"] = self.turns[-1].status if self.turns else None
        record["return"] = self.trajectory_return
        return json.loads(json.dumps(record))  # a deep copy that proves it is JSON-able

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Trajectory":
        """The inverse of `to_record` (also accepts a row read back by `datasets`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = {"task_id", "language", "arch", "prompt_version", "prompt"} - set(record)
        if missing:
            raise BadInputError(f"not a trajectory record: missing {sorted(missing)}",
                                hint="records are written by Trajectory.to_record()")
        fields = {k: v for k, v in record.items() if k in names and k != "turns"}
        fields["prompt"] = [{"role": m["role"], "content": m["content"]} for m in record["prompt"]]
        fields["turns"] = [Turn(**{**t, "verdict": _from_json_text(t.get("verdict")),
                                   "reward_parts": _from_json_text(t.get("reward_parts")) or {}})
                           for t in record.get("turns") or []]
        fields["metadata"] = _from_json_text(record.get("metadata")) or {}
        return cls(**fields).check()

    def to_row(self) -> dict[str, Any]:
        """`to_record()` with its free-form parts (`verdict`, `reward_parts`, `metadata`) as JSON
        text: the row of the `trajectories` dataset config (`features()`), lossless.

        Why text and not `datasets.Json`: datasets 5.2 writes Json through pandas' ujson with 10
        decimal places (1e-12 becomes 0.0, 2.2159493821477747e-06 becomes 2.2159e-06) and reads
        floats off by an ulp about a third of the time (measured), so a verdict would not survive
        the round trip. `json.dumps`/`json.loads` round-trip every float exactly."""
        record = self.to_record()
        for turn in record["turns"]:
            turn["verdict"] = _to_json_text(turn["verdict"])
            turn["reward_parts"] = _to_json_text(turn["reward_parts"])
        record["metadata"] = _to_json_text(record["metadata"])
        return record

    # ------------------------------------------------------------------ SFT and RL
    def to_sft_example(self, *, through_turn: int | None = None,
                       target: Literal["all_turns", "last_turn"] = "all_turns",
                       reasoning: bool = True) -> dict[str, list[Message]]:
        """A TRL SFT example.

        `all_turns`: `{"messages": [...]}` (conversational language modelling): train with
        `SFTConfig(assistant_only_loss=True)`, so every assistant turn (reasoning included) is in
        the loss and the prompt and feedback are not; TRL swaps in its Qwen3 training template,
        which keeps every turn's think block. `last_turn`: `{"prompt": [...], "completion":
        [assistant]}`: only the reply of `through_turn` is trained (completion-only loss), the
        earlier turns and their feedback are context."""
        messages = self.messages(through_turn=through_turn, reasoning=reasoning)
        if target == "all_turns":
            return {"messages": messages}
        if target == "last_turn":
            return {"prompt": messages[:-1], "completion": messages[-1:]}
        raise BadInputError(f"unknown SFT target {target!r}", hint="use 'all_turns' or 'last_turn'")

    def to_rl_row(self) -> dict[str, Any]:
        """The GRPO dataset row of this trajectory's first request (the same row `rl_prompt_row`
        builds from the task and config)."""
        return _rl_row(self.prompt, self.task_id, self.language, self.arch, self.prompt_version)


def _to_json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _from_json_text(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def rl_prompt_row(task: "Task", config: "PromptConfig") -> dict[str, Any]:
    """The GRPO dataset row for `task` under `config`: `prompt` (system + user messages) plus
    `prompt_key`, `task_id`, `language`, `arch`, `prompt_version` columns (TRL hands extra columns
    to reward functions; the rollout function finds the row by `prompt_key`)."""
    from amdkv.prompts.messages import build_messages

    return _rl_row(build_messages(task, config), task.id, config.language, config.arch, config.version)


def _rl_row(prompt: Sequence[Message], task_id: str, language: str, arch: str, version: str) -> dict[str, Any]:
    messages = [{"role": m["role"], "content": m["content"]} for m in prompt]
    return {"prompt": messages, "prompt_key": prompt_key(messages), "task_id": task_id, "language": language,
            "arch": arch, "prompt_version": version}


def prompt_key(messages: Iterable[Mapping[str, Any]]) -> str:
    """A stable id of a prompt: sha256 of its roles and contents only (keys that `datasets` adds
    with None values, and any other field, do not change it)."""
    canon = json.dumps([[m["role"], m["content"]] for m in messages], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:24]


def _check_gamma(gamma: float) -> None:
    if not 0.0 <= gamma <= 1.0:
        raise BadInputError(f"gamma={gamma} is outside [0, 1]", hint=f"the default is {DEFAULT_GAMMA}")


def discounted_returns(rewards: Sequence[float | None], gamma: float = DEFAULT_GAMMA) -> list[float | None]:
    """G_t = r_t + gamma * G_{t+1} (G_T = 0), i.e. G_t = sum_{k>=t} gamma^(k-t) r_k, for every turn t.

    A None reward (a turn that cannot be scored, e.g. `unverifiable`) makes G_t None for every
    t up to it: the sum has a term of unknown value, and TRL gives a None reward advantage 0
    instead of a wrong one."""
    _check_gamma(gamma)
    out: list[float | None] = [None] * len(rewards)
    running: float | None = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        r = rewards[t]
        if r is not None and not math.isfinite(r):
            raise BadInputError(f"turn {t} reward {r!r} is not finite", hint="use None for an unscorable turn")
        running = None if (r is None or running is None) else r + gamma * running
        out[t] = running
    return out


def discounted_return_reward(completions: list[Any], turn_rewards: list[list[float | None]],
                             gamma: list[float] | None = None, **_: Any) -> list[float | None]:
    """A TRL reward function: G_0 of each rollout from the `turn_rewards` (and `gamma`) extra
    fields that `chat_tokens.rollout_batch` returns; None (advantage 0) when unscorable."""
    gammas = gamma or [DEFAULT_GAMMA] * len(completions)
    return [(discounted_returns(r, g) or [0.0])[0] for r, g in zip(turn_rewards, gammas, strict=True)]


def features() -> Any:
    """`datasets.Features` of a `to_row()` row (the `trajectories` dataset config).

    Typed columns for everything with a fixed shape; the free-form parts (`verdict`,
    `reward_parts`, `metadata`) are JSON text (see `Trajectory.to_row` for why not `Json`). The
    `messages` column of the other configs uses `message_features()`."""
    from datasets import Features, List, Value

    text = Value("string")
    turn = {
        "stage": text, "reply": text, "reasoning": text, "code": text, "extraction": text, "verdict": text,
        "feedback": text, "finish_reason": text, "prompt_tokens": Value("int64"),
        "completion_tokens": Value("int64"), "reward": Value("float64"), "reward_parts": text,
        "completion_ids": List(Value("int32")), "logprobs": List(Value("float64")),
    }
    return Features({
        "task_id": text, "language": text, "arch": text, "prompt_version": text,
        "prompt": List({"role": text, "content": text}), "turns": List(turn), "model": text,
        "gamma": Value("float64"), "trajectory_id": text, "metadata": text, "schema_version": Value("int32"),
        "final_status": text, "return": Value("float64"),
    })


def message_features() -> Any:
    """`datasets` type of a `messages` column: role, content and (assistant) reasoning_content."""
    from datasets import List, Value

    return List({"role": Value("string"), "content": Value("string"), "reasoning_content": Value("string")})
