"""Planted completions for GRPO tests: a `rollout_func` (TRL's public hook) that returns fixed replies,
so what the reward sees is known; and, run as a script under `accelerate launch`, `train_rl.py` with
those replies in place of the model's (tests/test_train_launch.py kills the verification service
under it).

    accelerate launch --config_file training_configs/accelerate/cpu_ddp.yaml tests/planted_rollout.py \
        --config training_configs/rl_tiny_cpu.yaml --amdkv.verifier.url URL --amdkv.reward_log true
"""

from __future__ import annotations

import sys

from amdkv.tasks.builtin import solution_path

GOOD = solution_path("l1_relu", "triton").read_text()
WRONG = GOOD.replace("tl.maximum(x, 0.0)", "x")                     # mismatch: no ReLU at all
UNJUDGEABLE = GOOD.replace("import triton.language as tl",           # libdevice: the interpreter cannot judge
                           "import triton.language as tl\nfrom triton.language.extra import libdevice")


def reply(code: str) -> str:
    return f"<think>\nWrite it.\n</think>\n\n```python\n{code}```\n"


class PlantedRollout:
    """Single-turn generation returning fixed replies, in order within each call: the replies a
    model could write, so their rewards and advantages are known."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies

    def __call__(self, prompts, trainer):
        tok = trainer.processing_class
        prompt_ids = [tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)
                      ["input_ids"] for p in prompts]
        completion_ids = [tok(self.replies[i % len(self.replies)] + tok.eos_token, add_special_tokens=False)
                          ["input_ids"] for i in range(len(prompts))]
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


if __name__ == "__main__":
    from amdkv.train.rl import main

    sys.exit(main(sys.argv[1:], rollout_func=PlantedRollout([reply(GOOD), reply(WRONG)])))
