"""A trajectory as token ids for TRL's `rollout_func`: the prompt, then every turn's reply (trained)
and the feedback between turns (masked by `env_mask`), rendered with the chat template.

Why this shape (docs/trajectories.md, "RL"): TRL 1.16's `GRPOTrainer(rollout_func=...)` calls
`rollout_func(prompts, trainer)` and takes back `prompt_ids`, `completion_ids`, `logprobs` and an
optional `env_mask` (1 = a token the model sampled, in the loss; 0 = a token the environment
wrote, out of it); every other key goes to the reward functions. One rollout is one completion,
so a multi-turn attempt is one sequence: prompt | reply 0 | feedback 0 | reply 1 | ... | reply T-1.

Rendering: the sequence must be exactly what the model conditioned on while generating, so every
turn's prefix must be a prefix of the next one. Qwen3's stock template is not prefix-preserving (it
drops the think blocks of earlier turns); TRL's training variant (`qwen3_training.jinja`, returned
by `trl.chat_template_utils.get_training_chat_template`) is, and it is what TRL's SFT uses with
`assistant_only_loss`, so SFT and RL see the same text. `ChatTokens` renders with it, splits each
turn at the template's own boundaries and checks the prefix property instead of assuming it.

Segments are tokenised one by one, as a live rollout produces them (the prompt is encoded, the
model samples a reply, the feedback segment is encoded and appended). When a turn carries the
sampled `completion_ids`, they are used as they are (exact on-policy tokens).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Sequence

from amdkv.errors import BadInputError
from amdkv.prompts.trajectory import Message, Trajectory

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclasses.dataclass
class RolloutTokens:
    """One rollout in TRL's `rollout_func` shape. `logprobs` is None unless every turn has them
    (feedback tokens get 0.0: they are masked out of the loss and of importance sampling)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float] | None


def training_chat_template(tokenizer: "PreTrainedTokenizerBase") -> str:
    """TRL's prefix-preserving training variant of the tokenizer's template (the template itself
    when TRL has no variant for it and it is already prefix-preserving)."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    template = get_training_chat_template(tokenizer)
    if template is not None:
        return template
    if not is_chat_template_prefix_preserving(tokenizer):
        raise BadInputError("the tokenizer's chat template is not prefix-preserving and TRL has no training "
                            "variant for it, so multi-turn token sequences cannot be built from it",
                            hint="use a model whose template TRL knows (Qwen3, ...) or pass chat_template=")
    return tokenizer.chat_template


class ChatTokens:
    """Renders and tokenises conversations for multi-turn rollouts with one tokenizer and template.

    A live rollout uses `prompt_ids` for the first request and `feedback_ids` between turns; a
    recorded trajectory is converted whole by `rollout`. Both go through the same code, so a
    recorded trajectory gives the sequence its live rollout had."""

    def __init__(self, tokenizer: "PreTrainedTokenizerBase", *, chat_template: str | None = None,
                 enable_thinking: bool = True) -> None:
        self.tokenizer = tokenizer
        self.template = chat_template or training_chat_template(tokenizer)
        self.enable_thinking = enable_thinking
        self.eos = tokenizer.eos_token
        if not self.eos:
            raise BadInputError("the tokenizer has no eos_token, so a reply's end cannot be found",
                                hint="set tokenizer.eos_token to the end-of-turn token (<|im_end|> for Qwen3)")

    # ----------------------------------------------------------------- text
    def render(self, messages: Sequence[Message], *, generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(list(messages), tokenize=False,
                                                  add_generation_prompt=generation_prompt,
                                                  chat_template=self.template, enable_thinking=self.enable_thinking)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _after(self, prefix: str, full: str, what: str) -> str:
        if not full.startswith(prefix):
            raise BadInputError(f"the chat template is not prefix-preserving at {what}",
                                hint="use TRL's training template (training_chat_template) for multi-turn rollouts")
        return full[len(prefix):]

    def reply_text(self, before: Sequence[Message], assistant: Message, *, finished: bool = True) -> tuple[str, str]:
        """`(model_text, tail)`: what the model generates for `assistant` after `before` (up to and
        including the end-of-turn token; without it when the reply was cut off), and what the
        template writes after it (a newline for ChatML), which belongs to the environment."""
        full = self.render([*before, assistant], generation_prompt=False)
        text = self._after(self.render(before, generation_prompt=True), full, "an assistant reply")
        end = text.rfind(self.eos)
        if end < 0:
            raise BadInputError("the rendered assistant turn has no end-of-turn token",
                                hint=f"the template must close assistant turns with {self.eos!r}")
        cut = end + len(self.eos) if finished else end
        return text[:cut], text[cut:]

    def feedback_text(self, before: Sequence[Message], assistant: Message, feedback: str, *,
                      finished: bool = True) -> str:
        """The environment's text between a reply and the next one: the rest of the reply's turn,
        the feedback as a user turn and the next generation prompt."""
        _, tail = self.reply_text(before, assistant, finished=finished)
        done = self.render([*before, assistant], generation_prompt=False)
        nxt = self.render([*before, assistant, {"role": "user", "content": feedback}], generation_prompt=True)
        return tail + self._after(done, nxt, "a feedback message")

    # ----------------------------------------------------------------- ids
    def prompt_ids(self, prompt: Sequence[Message]) -> list[int]:
        return self.encode(self.render(prompt, generation_prompt=True))

    def feedback_ids(self, before: Sequence[Message], assistant: Message, feedback: str, *,
                     finished: bool = True) -> list[int]:
        return self.encode(self.feedback_text(before, assistant, feedback, finished=finished))

    def rollout(self, trajectory: Trajectory) -> RolloutTokens:
        """The whole trajectory as one rollout (every turn must carry its reply; every turn but the
        last its feedback)."""
        trajectory.check()
        if not trajectory.turns:
            raise BadInputError("a rollout needs at least one turn", hint="generate a reply first")
        before = [dict(m) for m in trajectory.prompt]
        prompt_ids = self.prompt_ids(before)
        completion: list[int] = []
        mask: list[int] = []
        logprobs: list[float] | None = []
        last = len(trajectory.turns) - 1
        for t, turn in enumerate(trajectory.turns):
            assistant = turn.assistant_message()
            finished = turn.finish_reason != "length"
            if turn.completion_ids is not None:
                ids = list(turn.completion_ids)
            else:
                ids = self.encode(self.reply_text(before, assistant, finished=finished)[0])
            completion += ids
            mask += [1] * len(ids)
            if logprobs is not None and turn.logprobs is not None and turn.completion_ids is not None:
                logprobs += list(turn.logprobs)
            else:
                logprobs = None
            if t == last:
                break
            env = self.feedback_ids(before, assistant, turn.feedback or "", finished=finished)
            completion += env
            mask += [0] * len(env)
            if logprobs is not None:
                logprobs += [0.0] * len(env)
            before = [*before, assistant, {"role": "user", "content": turn.feedback}]
        return RolloutTokens(prompt_ids, completion, mask, logprobs)


def rollout_batch(trajectories: Sequence[Trajectory], tokenizer: "PreTrainedTokenizerBase",
                  **kwargs: Any) -> dict[str, Any]:
    """What a `rollout_func` returns for these trajectories (one per prompt it was given, in order):
    `prompt_ids`, `completion_ids`, `logprobs` (None unless every rollout has them), `env_mask`,
    and the extra fields `turn_rewards`, `gamma` and `trajectory_return` that TRL passes to
    reward functions (`trajectory.discounted_return_reward` turns them into G_0)."""
    chat = ChatTokens(tokenizer, **kwargs)
    rollouts = [chat.rollout(t) for t in trajectories]
    logprobs = [r.logprobs for r in rollouts]
    return {
        "prompt_ids": [r.prompt_ids for r in rollouts],
        "completion_ids": [r.completion_ids for r in rollouts],
        "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
        "env_mask": [r.env_mask for r in rollouts],
        "turn_rewards": [t.turn_rewards() for t in trajectories],
        "gamma": [t.gamma for t in trajectories],
        "trajectory_return": [t.trajectory_return for t in trajectories],
    }
