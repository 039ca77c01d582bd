"""GRPO (amdkv.train.rl) on the tiny Qwen3 on the CPU with rewards from the real verifier (Triton
interpreter): planted completions scored and turned into advantages, the multi-turn rollout with
feedback masked out of the loss, step-time and status logging, and resume at the same step and data
order."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fixtures_tiny import fresh_tiny_model, tiny_model, tiny_tokenizer  # noqa: F401
from planted_rollout import GOOD, UNJUDGEABLE, WRONG, PlantedRollout, reply

pytest.importorskip("trl", reason="GRPO needs TRL (pip install 'amdkv[train]')")
REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "training_configs" / "rl_tiny_cpu.yaml"


def parsed(tmp_path, *extra: str):
    from trl import GRPOConfig

    from amdkv.train.args import AmdkvRLArguments, parse_config

    return parse_config(GRPOConfig, AmdkvRLArguments,
                        ["--config", str(CONFIG), "--output_dir", str(tmp_path / "out"),
                         "--amdkv.system_prompt", "false", *extra])


@pytest.fixture(scope="module")
def tasks():
    from amdkv.tasks.suites import load_suite

    return load_suite("builtin:train")


@pytest.fixture(scope="module")
def verifier():
    from amdkv.verify.verifier import Verifier

    with Verifier("cpu", trials=1, jobs=2) as v:
        yield v


def test_grpo_rewards_from_the_verifier(tmp_path, tasks, verifier, fresh_tiny_model, tiny_tokenizer):
    """Two GRPO steps, one group of four per step: a correct program, a wrong one, one the
    interpreter cannot judge, and no program. The correct one gets the highest reward and
    advantage, the unjudgeable one None and advantage exactly 0; statuses, reward parts and the
    step-time split are logged."""
    from amdkv.train.rl import build_grpo_trainer

    grpo, model_args, amdkv = parsed(tmp_path, "--max_completion_length", "2048")
    relu = [t for t in tasks if t.id == "l1_relu"]
    trainer = build_grpo_trainer(grpo, model_args, amdkv, model=fresh_tiny_model, tokenizer=tiny_tokenizer,
                                 tasks=relu, verifier=verifier, audit_verifier=False, record=True,
                                 rollout_func=PlantedRollout([reply(GOOD), reply(WRONG), reply(UNJUDGEABLE),
                                                              "Sorry, no program."]))
    trainer.train()
    assert trainer.state.global_step == 2
    history = trainer.amdkv_reward.history
    assert [h["statuses"] for h in history] == [["ok", "mismatch", "unverifiable", "no_program"]] * 2
    assert history[0]["rewards"] == [pytest.approx(1.5), pytest.approx(0.5), None, 0.0]
    advantages = list(trainer._logs["advantages"])
    assert advantages[2] == 0.0                                   # unverifiable: left out, advantage 0
    assert advantages[0] > advantages[1] > advantages[3]          # correct > wrong > nothing
    assert advantages[0] > 0 > advantages[3]
    log = trainer.state.log_history[0]
    assert log["amdkv/status/ok"] == 1 and log["amdkv/status/unverifiable"] == 1
    assert log["reward"] == pytest.approx((1.5 + 0.5 + 0.0) / 3)  # mean over the scored three
    assert log["amdkv/reward/correct"] == pytest.approx(1.0 / 3)
    for key in ("timing/generation_s", "timing/reward_s", "timing/update_s", "timing/reward_frac"):
        assert key in log and log[key] >= 0
    assert log["timing/reward_s"] > 0.1  # the verification really ran
    assert math.isfinite(log["loss"])


def test_multi_turn_rollout_masks_the_feedback(tmp_path, tasks, verifier, fresh_tiny_model, tiny_tokenizer):
    """max_turns 2 with the tiny model's own (random) replies: no program in turn 0, so the
    fix_format feedback is shown and a second reply asked for; the feedback's tokens are env_mask 0,
    the replies' 1, and the reward is the discounted return (0 here) for every rollout."""
    from amdkv.train.rl import build_grpo_trainer

    grpo, model_args, amdkv = parsed(tmp_path, "--max_completion_length", "8", "--max_steps", "1",
                                     "--amdkv.max_turns", "2", "--per_device_train_batch_size", "2",
                                     "--num_generations", "2")
    trainer = build_grpo_trainer(grpo, model_args, amdkv, model=fresh_tiny_model, tokenizer=tiny_tokenizer,
                                 tasks=[t for t in tasks if t.id == "l1_relu"], verifier=verifier,
                                 audit_verifier=False)
    prompt = trainer.train_dataset[0]["prompt"]
    out = trainer.rollout_func([prompt, prompt], trainer)
    assert out["turn_rewards"] == [[0.0, 0.0], [0.0, 0.0]]
    for ids, mask in zip(out["completion_ids"], out["env_mask"]):
        env = tiny_tokenizer.decode([i for i, m in zip(ids, mask) if m == 0])
        # the replies were cut at 8 tokens, so the environment closes them with <|im_end|> (masked)
        assert env.startswith("<|im_end|>\n<|im_start|>user\n") and env.endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert "ModelNew" in env  # the fix_format feedback says what is missing
        assert sum(mask) <= 2 * 8 + 1 and 0 < sum(mask) < len(mask)
    trainer.train()
    log = trainer.state.log_history[0]
    assert log["amdkv/turns_mean"] == 2.0 and log["reward"] == 0.0
    assert log["completions/mean_length"] <= 17  # only the model's tokens count


def test_resume_continues_at_the_same_step_and_data_order(tmp_path, tasks, verifier, tiny_tokenizer):
    """Four steps in one go, against two steps, a stop, and a resume from checkpoint-2: steps 2 and
    3 see the same prompts (task ids in order) and end with the same weights."""
    from transformers import TrainerCallback

    from amdkv.train.rl import build_grpo_trainer, run
    from amdkv.train.tiny_model import build_model

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 2:
                control.should_training_stop = True

    pool = [t for t in tasks if t.level == 1][:6]

    def trainer_for(out: str, *extra: str, callbacks=()):
        grpo, model_args, amdkv = parsed(tmp_path, "--output_dir", str(tmp_path / out), "--max_steps", "4",
                                         "--max_completion_length", "6", "--num_generations", "2",
                                         "--save_strategy", "steps", "--save_steps", "2", *extra)
        trainer = build_grpo_trainer(grpo, model_args, amdkv, model=build_model(tiny_tokenizer),
                                     tokenizer=tiny_tokenizer, tasks=pool, verifier=verifier, audit_verifier=False,
                                     record=True, callbacks=callbacks)
        return trainer, grpo

    straight, args = trainer_for("straight")
    run(straight, args)
    stopped, args = trainer_for("resumed", callbacks=[StopAt()])
    run(stopped, args)
    assert stopped.state.global_step == 2 and (tmp_path / "resumed" / "checkpoint-2").is_dir()
    resumed, args = trainer_for("resumed", "--resume_from_checkpoint", str(tmp_path / "resumed" / "checkpoint-2"))
    run(resumed, args)
    assert resumed.state.global_step == 4
    order = {h["step"]: h["task_ids"] for h in straight.amdkv_reward.history}
    again = {h["step"]: h["task_ids"] for h in resumed.amdkv_reward.history}
    assert sorted(again) == [2, 3] and again == {s: order[s] for s in (2, 3)}
    assert {h["step"]: h["task_ids"] for h in stopped.amdkv_reward.history} == {s: order[s] for s in (0, 1)}
    assert resumed.amdkv_reward.guard.state_dict()["seen"] == straight.amdkv_reward.guard.state_dict()["seen"]
    import torch

    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def test_grpo_generates_with_a_static_kv_cache(tmp_path, tasks, verifier, fresh_tiny_model, tiny_tokenizer):
    """The model really generates (no planted rollout) with `cache_implementation: static`, through
    AmdkvGRPOTrainer._generate and models.plain_forward (the learning run's setting: on the H200 a
    static cache under accelerate's bf16 autocast wrapper mixed dtypes; CPU has no bf16 training, so
    here the path runs in float32 and the test guards the wiring, not the dtype)."""
    from amdkv.train.rl import build_grpo_trainer

    grpo, model_args, amdkv = parsed(tmp_path, "--max_steps", "1", "--max_completion_length", "8",
                                     "--cache_implementation", "static")
    assert grpo.cache_implementation == "static"
    trainer = build_grpo_trainer(grpo, model_args, amdkv, model=fresh_tiny_model, tokenizer=tiny_tokenizer,
                                 tasks=[t for t in tasks if t.id == "l1_relu"], verifier=verifier,
                                 audit_verifier=False)
    trainer.train()
    assert trainer.state.global_step == 1
    logged = next(h for h in trainer.state.log_history if "reward" in h)
    assert logged["timing/generation_s"] > 0 and logged["completions/max_length"] <= 8
