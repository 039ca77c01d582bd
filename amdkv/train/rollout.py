"""Multi-turn RL: a TRL `rollout_func` that writes, verifies, shows the feedback and asks again.

The mechanism the trajectory format chose (docs/trajectories.md, "RL"): one rollout is one token
sequence `prompt | reply 0 | feedback 0 | reply 1 | ... | reply T-1`; `env_mask` hides the
feedback from the loss; the rollout's reward is the discounted return G_0 = sum_t gamma^t r_t of
its per-turn rewards (r_t from `reward.score`, the single-turn rule), so a program right at once
beats one fixed after feedback. A turn whose reward is None (`unverifiable`, or an infra error
that stayed one after its retries) makes G_0 None: advantage 0.

Per turn, for every rollout still going: generate (TRL's own generation path, so vLLM colocate or
server, or `model.generate` under DeepSpeed's parameter gathering, whichever the run configured),
extract, verify, score, build the feedback (`feedback_for`), and append the feedback's tokens
(`ChatTokens.feedback_ids`) to the context. A rollout stops when its program is correct (unless
`continue_after_correct`: then it goes on to `optimise` turns), when the feedback has no next
stage (`unverifiable`), after an infra error, or at `max_turns`. Each turn's reply gets at most
`max_completion_length` new tokens.

Collectives: generation under ZeRO-3 or vLLM server mode, and the reward's infra guard, are
collective, so every rank runs the same number of turns: a turn happens while any rank has a
rollout going, and a rank with none generates for a placeholder prompt whose reply is discarded.
"""

from __future__ import annotations

import random
from typing import Any, Iterable, Mapping

from amdkv.errors import BadInputError
from amdkv.prompts.messages import PromptConfig, feedback_for
from amdkv.prompts.trajectory import DEFAULT_GAMMA, Trajectory, Turn, discounted_returns, prompt_key
from amdkv.train.distributed import any_rank, process_index
from amdkv.train.reward import VerdictReward, shuffle_within_groups
from amdkv.verify.verdict import OK


class MultiTurnRollout:
    """`rollout_func(prompts, trainer)` for `GRPOTrainer` (see the module docstring). `rows`: the RL
    dataset's rows (found again by `prompt_key`, since TRL hands the rollout only the prompts)."""

    def __init__(self, judge: VerdictReward, rows: Iterable[Mapping[str, Any]], prompt_config: PromptConfig, *,
                 max_turns: int = 3, gamma: float = DEFAULT_GAMMA, continue_after_correct: bool = False,
                 times: Any = None) -> None:
        if max_turns < 1:
            raise BadInputError(f"max_turns={max_turns}", hint="at least 1")
        self.judge = judge
        self.rows = {r["prompt_key"]: dict(r) for r in rows}
        self.config = prompt_config
        self.max_turns = max_turns
        self.gamma = gamma
        self.continue_after_correct = continue_after_correct
        self.times = times
        self._chat = None

    def _row(self, prompt: list[Mapping[str, Any]]) -> dict[str, Any]:
        key = prompt_key(prompt)
        if key not in self.rows:
            raise BadInputError("a prompt reached the rollout that is not in its dataset",
                                hint="build the rollout from the same rows as the GRPO train dataset")
        return self.rows[key]

    def __call__(self, prompts: list[list[Mapping[str, Any]]], trainer: Any) -> dict[str, Any]:
        from amdkv.prompts.chat_tokens import ChatTokens, rollout_batch

        tokenizer = trainer.processing_class
        if self._chat is None:
            self._chat = ChatTokens(tokenizer, enable_thinking=(trainer.args.chat_template_kwargs or {})
                                    .get("enable_thinking", True))
        chat = self._chat
        step = int(trainer.state.global_step)
        rows = [self._row(p) for p in prompts]
        trajs = [Trajectory(task_id=r["task_id"], language=r["language"], arch=r["arch"],
                            prompt_version=r["prompt_version"], gamma=self.gamma,
                            prompt=[{"role": m["role"], "content": m["content"]} for m in p])
                 for r, p in zip(rows, prompts)]
        contexts = [chat.prompt_ids(t.prompt) for t in trajs]
        stages = ["write"] * len(trajs)
        active = list(range(len(trajs)))
        verify_s = 0.0
        for turn in range(self.max_turns):
            if not any_rank(bool(active)):
                break
            batch = active or [0]  # a rank with nothing to do still takes part in the collectives
            ids, _ = trainer._generate_single_turn([contexts[i] for i in batch], None, {}, 1)
            ids = ids if active else []
            texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
            scores, extractions, verdicts = self.judge.judge(texts, [trajs[i].task_id for i in active], step=step,
                                                             log_metric=trainer._log_metric)
            verify_s += self.judge.last_verify_s
            still = []
            for i, out, s, ex, v in zip(active, ids, scores, extractions, verdicts):
                finished = bool(out) and out[-1] in _eos_ids(trainer)
                traj = trajs[i]
                t = Turn.from_extraction(stages[i], ex, verdict=v.to_dict() if v is not None else None,
                                         finish_reason="stop" if finished else "length", completion_ids=list(out),
                                         completion_tokens=len(out), reward=s.reward, reward_parts=dict(s.parts))
                traj.turns.append(t)
                if s.infra or turn == self.max_turns - 1:
                    continue
                fb = feedback_for(self.config, verdict=v, extraction=ex)
                if fb.stage is None or (s.status == OK and not self.continue_after_correct):
                    continue
                t.feedback = fb.content
                contexts[i] = contexts[i] + list(out) + chat.feedback_ids(
                    traj.request(turn), t.assistant_message(), fb.content, finished=finished)
                stages[i] = fb.stage
                still.append(i)
            active = still
        if self.times is not None:
            self.times.move("generation", "reward", verify_s)
        return rollout_batch(trajs, tokenizer, chat_template=chat.template, enable_thinking=chat.enable_thinking)


def _eos_ids(trainer: Any) -> set[int]:
    return set(getattr(trainer, "eos_token_ids", None) or [trainer.processing_class.eos_token_id])


class ReturnReward:
    """The multi-turn reward function: G_0 of each rollout from the `turn_rewards` and `gamma` that
    the rollout returns (None: advantage 0); with `shuffle_within_groups`, the control's permutation."""

    __name__ = "turn_return"

    def __init__(self, shuffle_within_groups: bool = False, seed: int = 0) -> None:
        self.shuffle = shuffle_within_groups
        self._rng = random.Random(seed + 7919 * process_index())

    def __call__(self, completions: list[Any], turn_rewards: list[list[float | None]],
                 gamma: list[float] | None = None, prompt_key: list[str] | None = None,
                 log_metric: Any = None, **_: Any) -> list[float | None]:
        gammas = gamma or [DEFAULT_GAMMA] * len(completions)
        returns = [(discounted_returns(r, g) or [None])[0] for r, g in zip(turn_rewards, gammas, strict=True)]
        if log_metric is not None and turn_rewards:
            log_metric("amdkv/turns_mean", sum(len(r) for r in turn_rewards) / len(turn_rewards))
        if self.shuffle:
            returns = shuffle_within_groups(returns, prompt_key or [str(i) for i in range(len(returns))], self._rng)
        return returns
