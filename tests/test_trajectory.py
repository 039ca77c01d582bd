"""The trajectory format: records, `datasets` round trip, SFT examples (TRL SFTTrainer) and RL rollouts
(TRL GRPOTrainer with `rollout_func` + `env_mask`), all from one Trajectory, on the tiny Qwen3 model."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from amdkv.errors import BadInputError
from amdkv.prompts import PromptConfig, Trajectory, Turn, discounted_returns, extract_code, feedback_for, prompt_key
from amdkv.prompts.trajectory import discounted_return_reward, features, message_features, rl_prompt_row
from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_suite

from fixtures_tiny import fresh_tiny_model, tiny_tokenizer  # noqa: F401  (session fixtures)

VERDICTS = Path(__file__).resolve().parent / "data" / "verdicts"
CONFIG = PromptConfig(language="triton", arch="gfx942")


@pytest.fixture(scope="module")
def task():
    return next(t for t in load_suite("builtin:train") if t.id == "l1_relu")


def _verdict(name: str) -> dict:
    return json.loads((VERDICTS / f"{name}.json").read_text())


def two_turns(task, *, gamma: float = 0.6) -> Trajectory:
    """Turn 0: a program with a tail bug (its real mismatch verdict); turn 1: the reference solution
    (its real ok verdict). Replies carry think blocks; feedback is built by feedback_for."""
    traj = Trajectory.start(task, CONFIG, model="tiny", gamma=gamma, sampling={"temperature": 0.7})
    buggy = (Path(__file__).resolve().parent / "data" / "adversarial" / "mask_bug_tail.py").read_text()
    ex0 = extract_code(f"<think>\nOne program per 1024 elements.\n</think>\n\n```python\n{buggy}```\n", "triton")
    fb0 = feedback_for(CONFIG, verdict=_verdict("mismatch_tail"), extraction=ex0)
    traj.turns.append(Turn.from_extraction("write", ex0, verdict=_verdict("mismatch_tail"), feedback=fb0.content,
                                           reward=0.4, reward_parts={"compiled": 0.4, "correct": 0.0},
                                           prompt_tokens=900, completion_tokens=300, finish_reason="stop"))
    good = solution_path("l1_relu", "triton").read_text()
    ex1 = extract_code(f"<think>\nMask the tail.\n</think>\n\nFixed:\n\n```python\n{good}```\n", "triton")
    traj.turns.append(Turn.from_extraction(fb0.stage, ex1, verdict=_verdict("ok_relu_gfx942"), reward=1.4,
                                           reward_parts={"compiled": 0.4, "correct": 1.0}, finish_reason="stop"))
    return traj.check()


# ------------------------------------------------------------------------------ structure
def test_turns_and_requests(task):
    traj = two_turns(task)
    assert traj.turns[1].stage == "fix_mismatch" and traj.turns[0].status == "mismatch"
    assert traj.turns[0].reasoning == "One program per 1024 elements." and "<think>" not in traj.turns[0].reply
    first, second = traj.request(0), traj.request(1)
    assert first == traj.prompt and second[:2] == traj.prompt
    assert second[2] == {"role": "assistant", "content": traj.turns[0].reply,
                         "reasoning_content": traj.turns[0].reasoning}
    assert second[3] == {"role": "user", "content": traj.turns[0].feedback}
    assert traj.messages()[-1]["content"] == traj.turns[1].reply
    assert "reasoning_content" not in traj.request(1, reasoning=False)[2]
    assert traj.best_turn() == 1
    assert traj.metadata["prompt_config"] == CONFIG.to_dict()


def test_discounted_returns_formula():
    assert discounted_returns([0.4, 1.4], 0.6) == pytest.approx([0.4 + 0.6 * 1.4, 1.4])
    assert discounted_returns([1.0, 2.0, 4.0], 0.5) == pytest.approx([1 + 0.5 * 2 + 0.25 * 4, 2 + 0.5 * 4, 4.0])
    assert discounted_returns([0.4, None, 1.0], 0.6) == [None, None, 1.0]
    assert discounted_returns([], 0.6) == []
    with pytest.raises(BadInputError):
        discounted_returns([1.0], 1.5)
    with pytest.raises(BadInputError):
        discounted_returns([math.nan], 0.6)
    assert discounted_return_reward([None, None], turn_rewards=[[0.4, 1.4], [None]], gamma=[0.6, 0.6]) == \
        pytest.approx([1.24, None])


def test_structural_checks(task):
    traj = two_turns(task)
    traj.turns[0].feedback = None
    with pytest.raises(BadInputError, match="no feedback"):
        traj.check()
    traj = two_turns(task)
    traj.turns[1].extraction = "no_code_block"
    with pytest.raises(BadInputError, match="code must be present"):
        traj.check()
    traj = two_turns(task)
    traj.gamma = 1.2
    with pytest.raises(BadInputError, match="gamma"):
        traj.check()
    with pytest.raises(BadInputError, match="missing"):
        Trajectory.from_record({"task_id": "x"})


# ------------------------------------------------------------------------------ records
def test_record_round_trip(task):
    traj = two_turns(task)
    record = traj.to_record()
    assert record["final_status"] == "ok" and record["return"] == pytest.approx(1.24)
    again = Trajectory.from_record(json.loads(json.dumps(record)))
    assert again == traj
    assert again.to_record() == record


def test_record_round_trips_through_datasets_parquet(task, tmp_path):
    """The `trajectories` config as a Hub-layout folder read back by load_dataset (offline)."""
    from datasets import Dataset, load_dataset

    trajs = [two_turns(task), two_turns(task, gamma=0.9)]
    trajs[1].turns[1].completion_ids, trajs[1].turns[1].logprobs = [5, 6, 7], [-0.5, -0.25, -1.0]
    (tmp_path / "trajectories").mkdir()
    ds = Dataset.from_list([t.to_row() for t in trajs], features=features())
    ds.to_parquet(str(tmp_path / "trajectories" / "train-00000-of-00001.parquet"))
    back = load_dataset(str(tmp_path), data_dir="trajectories", split="train")
    assert back.features == features()
    for row, traj in zip(back, trajs):
        again = Trajectory.from_record(row)
        assert again == traj
        assert again.to_sft_example() == traj.to_sft_example()
        assert again.to_rl_row() == traj.to_rl_row()


def test_messages_column_features(task):
    from datasets import Dataset, Features

    messages = two_turns(task).messages()
    ds = Dataset.from_list([{"messages": messages}], features=Features({"messages": message_features()}))
    row = ds[0]["messages"]
    assert [m["role"] for m in row] == ["system", "user", "assistant", "user", "assistant"]
    assert row[0]["reasoning_content"] is None and row[2]["reasoning_content"] == messages[2]["reasoning_content"]
    assert [{k: v for k, v in m.items() if v is not None} for m in row] == messages


# ------------------------------------------------------------------------------ SFT
def test_sft_examples(task):
    traj = two_turns(task)
    full = traj.to_sft_example()
    assert list(full) == ["messages"] and full["messages"] == traj.messages()
    last = traj.to_sft_example(target="last_turn")
    assert last["prompt"] == traj.request(1) and last["completion"] == [traj.turns[1].assistant_message()]
    first_only = traj.to_sft_example(through_turn=0)
    assert first_only["messages"][-1]["content"] == traj.turns[0].reply and len(first_only["messages"]) == 3
    bare = traj.to_sft_example(reasoning=False)
    assert all("reasoning_content" not in m for m in bare["messages"])
    with pytest.raises(BadInputError):
        traj.to_sft_example(target="everything")


def test_sft_assistant_mask_covers_replies_and_thinking_only(task, tiny_tokenizer):
    """With TRL's Qwen3 training template (what SFTTrainer swaps in for assistant_only_loss), the
    loss mask covers both replies with their think blocks and never the prompt or the feedback."""
    from amdkv.prompts.chat_tokens import training_chat_template

    traj = two_turns(task)
    out = tiny_tokenizer.apply_chat_template(traj.messages(), chat_template=training_chat_template(tiny_tokenizer),
                                             return_assistant_tokens_mask=True, return_dict=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    trained = tiny_tokenizer.decode([i for i, m in zip(ids, mask) if m])
    expected = "".join(f"<think>\n{t.reasoning}\n</think>\n\n{t.reply}<|im_end|>\n" for t in traj.turns)
    assert trained == expected
    assert traj.turns[0].feedback.strip()[:60] not in trained


def test_sft_trainer_takes_both_forms(task, tiny_tokenizer, fresh_tiny_model, tmp_path):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    traj = two_turns(task)
    for form, kwargs in (("all_turns", {"assistant_only_loss": True}), ("last_turn", {})):
        ds = Dataset.from_list([traj.to_sft_example(target=form)])
        args = SFTConfig(output_dir=str(tmp_path / form), max_steps=1, per_device_train_batch_size=1, bf16=False,
                         use_cpu=True, report_to="none", save_strategy="no", max_length=8192, **kwargs)
        trainer = SFTTrainer(model=fresh_tiny_model, args=args, train_dataset=ds, processing_class=tiny_tokenizer)
        trainer.train()
        assert math.isfinite(trainer.state.log_history[-1]["train_loss"])


# ------------------------------------------------------------------------------ RL
def test_rl_row(task):
    traj = two_turns(task)
    row = traj.to_rl_row()
    assert row == rl_prompt_row(task, CONFIG)
    assert set(row) == {"prompt", "prompt_key", "task_id", "language", "arch", "prompt_version"}
    noisy = [{**m, "reasoning_content": None, "name": None} for m in row["prompt"]]
    assert prompt_key(noisy) == row["prompt_key"]
    assert prompt_key(row["prompt"][:1]) != row["prompt_key"]


def test_rollout_tokens_mask_exactly_the_feedback(task, tiny_tokenizer):
    """The `rollout_func` shape for a 2-turn trajectory through Qwen3's (training) template:
    prompt | reply 0 | feedback 0 | reply 1, feedback tokens masked by env_mask."""
    from amdkv.prompts.chat_tokens import ChatTokens, training_chat_template

    traj = two_turns(task)
    chat = ChatTokens(tiny_tokenizer)
    r = chat.rollout(traj)
    assert len(r.completion_ids) == len(r.env_mask) and r.logprobs is None
    whole = tiny_tokenizer.apply_chat_template(traj.messages(), tokenize=False,
                                               chat_template=training_chat_template(tiny_tokenizer))
    assert tiny_tokenizer.decode(r.prompt_ids + r.completion_ids) + "\n" == whole
    assert tiny_tokenizer.decode(r.prompt_ids) == tiny_tokenizer.apply_chat_template(
        traj.prompt, tokenize=False, add_generation_prompt=True)
    env = tiny_tokenizer.decode([i for i, m in zip(r.completion_ids, r.env_mask) if m == 0])
    assert env == f"\n<|im_start|>user\n{traj.turns[0].feedback}<|im_end|>\n<|im_start|>assistant\n"
    model = tiny_tokenizer.decode([i for i, m in zip(r.completion_ids, r.env_mask) if m == 1])
    assert model == "".join(f"<think>\n{t.reasoning}\n</think>\n\n{t.reply}<|im_end|>" for t in traj.turns)
    runs = [m for k, m in enumerate(r.env_mask) if k == 0 or m != r.env_mask[k - 1]]
    assert runs == [1, 0, 1]  # reply 0 | feedback 0 | reply 1
    # A live rollout built segment by segment gives the same ids.
    a0 = traj.turns[0].assistant_message()
    live = (chat.encode(chat.reply_text(traj.prompt, a0)[0]) + chat.feedback_ids(traj.prompt, a0, traj.turns[0].feedback)
            + chat.encode(chat.reply_text(traj.request(1), traj.turns[1].assistant_message())[0]))
    assert live == r.completion_ids and chat.prompt_ids(traj.prompt) == r.prompt_ids


def test_rollout_uses_sampled_ids_logprobs_and_cut_replies(task, tiny_tokenizer):
    from amdkv.prompts.chat_tokens import ChatTokens, rollout_batch

    traj = two_turns(task)
    traj.turns[0].completion_ids, traj.turns[0].logprobs = [11, 12, 13], [-0.1, -0.2, -0.3]
    traj.turns[0].finish_reason = "length"  # cut off: the environment closes the turn
    traj.turns[1].completion_ids, traj.turns[1].logprobs = [14, 15], [-0.4, -0.5]
    r = ChatTokens(tiny_tokenizer).rollout(traj)
    n_env = r.env_mask.count(0)
    assert r.completion_ids[:3] == [11, 12, 13] and r.completion_ids[-2:] == [14, 15]
    assert r.logprobs == [-0.1, -0.2, -0.3] + [0.0] * n_env + [-0.4, -0.5]
    env = tiny_tokenizer.decode(r.completion_ids[3:3 + n_env])
    assert env.startswith("<|im_end|>\n<|im_start|>user\n")
    batch = rollout_batch([traj, two_turns(task)], tiny_tokenizer)
    assert batch["logprobs"] is None  # one rollout without logprobs: TRL then recomputes them
    assert batch["trajectory_return"] == pytest.approx([1.24, 1.24]) and batch["gamma"] == [0.6, 0.6]


def test_grpo_trainer_takes_the_rollouts(task, tiny_tokenizer, fresh_tiny_model, tmp_path):
    """One GRPO step with `rollout_func` returning rollout_batch(...) of 2-turn trajectories: TRL
    counts only env_mask=1 tokens as completion tokens, and the reward is G_0 from the turn rewards."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from amdkv.prompts.chat_tokens import rollout_batch

    rows = {r["prompt_key"]: r for r in [rl_prompt_row(task, CONFIG)]}
    seen: dict = {}

    def rollout_func(prompts, trainer):
        trajs = []
        for i, prompt in enumerate(prompts):
            row = rows[prompt_key(prompt)]
            assert row["task_id"] == task.id
            traj = two_turns(task)
            traj.turns[0].reward = 0.4 * (i % 2)  # two different returns in the group
            trajs.append(traj)
        out = rollout_batch(trajs, trainer.processing_class)
        seen["model_tokens"] = [sum(m) for m in out["env_mask"]]
        seen["tokens"] = [len(c) for c in out["completion_ids"]]
        seen["returns"] = out["trajectory_return"]
        return out

    args = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=4096, bf16=False, use_cpu=True, gradient_checkpointing=False,
                      report_to="none", save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=fresh_tiny_model, reward_funcs=[discounted_return_reward], args=args,
                          train_dataset=Dataset.from_list(list(rows.values()) * 2), processing_class=tiny_tokenizer,
                          rollout_func=rollout_func)
    trainer.train()
    log = trainer.state.log_history[0]
    assert seen["model_tokens"][0] < seen["tokens"][0]
    assert log["completions/mean_length"] == pytest.approx(sum(seen["model_tokens"]) / 2)
    assert log["reward"] == pytest.approx(sum(seen["returns"]) / 2)
    assert seen["returns"] == pytest.approx([0.84, 1.24])
    assert math.isfinite(log["loss"])
