"""pass@1 of a policy on a task suite, during and after training: greedy replies to each task's
`write` prompt, extracted, verified and counted (the reward's own scoring path, so "correct" means
exactly what the reward calls correct: status `ok`).

`pass_at_1(model, tokenizer, tasks, verifier, ...)` returns per-task statuses and the fraction
correct; `PassAtOneCallback` runs it every N optimizer steps of a TRL trainer (and at the end) and
keeps the curve. One sample per task, greedy, so pass@1 is the plain fraction (DESIGN.md section 5's
unbiased estimator reduces to it with n = 1).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainerCallback

from amdkv.prompts.messages import PromptConfig
from amdkv.train.data import prompt_messages
from amdkv.train.models import plain_forward
from amdkv.train.reward import VerdictReward


@dataclasses.dataclass
class PassAtOne:
    pass_at_1: float
    n_tasks: int
    statuses: dict[str, int]
    per_task: dict[str, str]
    seconds: float
    step: int | None = None
    generate_s: float | None = None  # of `seconds`, the part spent generating (the rest: verifying)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def generate_replies(model: Any, tokenizer: Any, prompts: Sequence[list[dict[str, str]]], *, max_new_tokens: int,
                     batch_size: int = 64, chat_template_kwargs: dict[str, Any] | None = None,
                     cache_implementation: str | None = None) -> list[str]:
    """Greedy replies (text without special tokens), batched with left padding.

    `cache_implementation="static"` preallocates the KV cache for prompt + `max_new_tokens` instead
    of growing it every step (transformers then compiles the decoding step on CUDA): the same
    greedy tokens, and on the H200 2.6x faster per step (docs/training.md); None: transformers'
    default (a growing dynamic cache). The model generates with its own forward, never under the
    autocast wrapper of a trainer that prepared it (`amdkv.train.models.plain_forward`): the reply
    is the saved model's, and a static cache sees one dtype."""
    import torch

    was_training, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"  # a decoder-only model continues from the end of each row
    replies: list[str] = []
    device = next(model.parameters()).device
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = [list(p) for p in prompts[start:start + batch_size]]
            enc = tokenizer.apply_chat_template(chunk, add_generation_prompt=True, tokenize=True, return_dict=True,
                                                padding=True, return_tensors="pt", **(chat_template_kwargs or {}))
            enc = {k: v.to(device) for k, v in enc.items()}
            with torch.no_grad(), plain_forward(model):
                out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False,
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                                     cache_implementation=cache_implementation)
            replies += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        model.train(was_training)
        tokenizer.padding_side = side
    return replies


def pass_at_1(model: Any, tokenizer: Any, tasks: Sequence[Any], verifier: Any, *,
              prompt_config: PromptConfig | None = None, system_prompt: bool = True, max_new_tokens: int = 1024,
              batch_size: int = 64, step: int | None = None, cache_implementation: str | None = None) -> PassAtOne:
    """Greedy pass@1 of `model` on `tasks`, verified by `verifier` (any BaseVerifier);
    `cache_implementation` as in `generate_replies`."""
    t0 = time.perf_counter()
    config = prompt_config or PromptConfig()
    prompts = [prompt_messages(t, config, system_prompt) for t in tasks]
    replies = generate_replies(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                               cache_implementation=cache_implementation)
    generate_s = time.perf_counter() - t0
    scorer = VerdictReward(verifier, {t.id: t for t in tasks}, language=config.language, target_platform=None)
    scores, _, _ = scorer.score_texts(replies, [t.id for t in tasks])
    per_task = {t.id: s.status for t, s in zip(tasks, scores)}
    correct = sum(1 for s in scores if s.status == "ok")
    return PassAtOne(pass_at_1=correct / len(tasks) if tasks else 0.0, n_tasks=len(tasks),
                     statuses=dict(Counter(per_task.values())), per_task=per_task,
                     seconds=time.perf_counter() - t0, step=step, generate_s=generate_s)


class PassAtOneCallback(TrainerCallback):
    """pass@1 every `every_steps` optimizer steps and when training ends; the curve is kept in
    `results` and, with `out_path`, rewritten as JSON after each point. Single-process runs (the
    model is generated from directly)."""

    def __init__(self, tokenizer: Any, tasks: Sequence[Any], verifier: Any, *, every_steps: int,
                 out_path: str | Path | None = None, **eval_kwargs: Any) -> None:
        self.tokenizer = tokenizer
        self.tasks = list(tasks)
        self.verifier = verifier
        self.every_steps = every_steps
        self.out_path = Path(out_path) if out_path else None
        self.eval_kwargs = eval_kwargs
        self.results: list[PassAtOne] = []

    def _run(self, model: Any, step: int) -> None:
        if self.results and self.results[-1].step == step:
            return
        self.results.append(pass_at_1(model, self.tokenizer, self.tasks, self.verifier, step=step, **self.eval_kwargs))
        if self.out_path is not None:
            self.out_path.parent.mkdir(parents=True, exist_ok=True)
            self.out_path.write_text(json.dumps([r.to_dict() for r in self.results], indent=1))

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        if self.every_steps and state.global_step % self.every_steps == 0:
            self._run(model, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        self._run(model, state.global_step)
