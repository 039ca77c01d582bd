"""SFT (amdkv.train.sft) on the tiny Qwen3 on the CPU: two real SFTTrainer steps, full and LoRA, with
the labels checked to cover the completion and nothing else; conversational data trained on the
assistant turns only; packing checked safe (a packed batch's loss equals the unpacked one's)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from amdkv.errors import BadInputError
from fixtures_tiny import fresh_tiny_model, tiny_model, tiny_tokenizer  # noqa: F401
from test_trajectory import two_turns

pytest.importorskip("trl", reason="SFT needs TRL (pip install 'amdkv[train]')")
REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "training_configs" / "sft_tiny_cpu.yaml"


def parsed(tmp_path, *extra: str):
    from trl import SFTConfig

    from amdkv.train.args import AmdkvSFTArguments, parse_config

    return parse_config(SFTConfig, AmdkvSFTArguments,
                        ["--config", str(CONFIG), "--output_dir", str(tmp_path / "out"), "--amdkv.max_examples", "4",
                         "--amdkv.system_prompt", "false", *extra])


def trained_tokens(trainer, index: int = 0):
    """(input ids, labels) of one collated training example."""
    batch = trainer.data_collator([trainer.train_dataset[index]])
    return batch["input_ids"][0].tolist(), batch["labels"][0].tolist()


def test_two_sft_steps_train_the_completion_only(tmp_path, fresh_tiny_model, tiny_tokenizer):
    from amdkv.train.sft import build_sft_trainer

    sft_args, model_args, amdkv_args = parsed(tmp_path)
    trainer = build_sft_trainer(sft_args, model_args, amdkv_args, model=fresh_tiny_model, tokenizer=tiny_tokenizer)
    assert trainer.args.completion_only_loss is True
    ids, labels = trained_tokens(trainer)
    first = next(i for i, lab in enumerate(labels) if lab != -100)
    assert all(lab == -100 for lab in labels[:first]) and labels[first:] == ids[first:]
    trained = tiny_tokenizer.decode(ids[first:])
    prompt = tiny_tokenizer.decode(ids[:first])
    assert trained.startswith("<think>\n\n</think>\n\n```python\n") and trained.endswith("```<|im_end|>\n")
    assert "class ModelNew" in trained and "class Model(" not in trained  # the task's reference stays in the prompt
    assert "class Model(" in prompt and prompt.rstrip().endswith("<|im_start|>assistant")
    before = {n: p.detach().clone() for n, p in fresh_tiny_model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    assert math.isfinite(trainer.state.log_history[-1]["train_loss"])
    assert any(not p.detach().equal(before[n]) for n, p in fresh_tiny_model.named_parameters())


def test_two_lora_steps_change_only_the_adapters(tmp_path, fresh_tiny_model, tiny_tokenizer):
    from amdkv.train.sft import build_sft_trainer

    sft_args, model_args, amdkv_args = parsed(tmp_path, "--use_peft", "true", "--lora_r", "4", "--lora_alpha", "8",
                                              "--lora_target_modules", "q_proj", "v_proj", "--learning_rate", "0.05")
    base = {n: p.detach().clone() for n, p in fresh_tiny_model.named_parameters()}
    trainer = build_sft_trainer(sft_args, model_args, amdkv_args, model=fresh_tiny_model, tokenizer=tiny_tokenizer)
    trainer.train()
    assert trainer.state.global_step == 2
    lora = {n: p for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert lora and all(p.requires_grad for p in lora.values())
    assert any(float(p.detach().abs().sum()) > 0 for n, p in lora.items() if "lora_B" in n)  # B starts at 0: it moved
    for name, p in trainer.model.named_parameters():
        if "lora_" not in name:
            assert not p.requires_grad
            plain = name.replace("base_model.model.", "").replace(".base_layer", "")
            assert p.detach().equal(base[plain]), name


def test_conversational_data_trains_the_assistant_turns(tmp_path, fresh_tiny_model, tiny_tokenizer):
    """`trajectories` -> `messages` -> assistant_only_loss: both replies (with their think blocks) are
    trained, never the prompt or the feedback between them."""
    from datasets import Dataset

    from amdkv.prompts.trajectory import features
    from amdkv.tasks.suites import load_suite
    from amdkv.train.data import sft_dataset
    from amdkv.train.sft import build_sft_trainer

    relu = next(t for t in load_suite("builtin:train") if t.id == "l1_relu")
    traj = two_turns(relu)
    traj.prompt = traj.prompt[1:]  # no system message: the whole conversation fits max_length
    data = sft_dataset(Dataset.from_list([traj.to_row()], features=features()))
    sft_args, model_args, amdkv_args = parsed(tmp_path, "--max_steps", "1", "--per_device_train_batch_size", "1")
    trainer = build_sft_trainer(sft_args, model_args, amdkv_args, train_dataset=data, model=fresh_tiny_model,
                                tokenizer=tiny_tokenizer)
    assert trainer.args.assistant_only_loss is True
    ids, labels = trained_tokens(trainer)
    trained = tiny_tokenizer.decode([i for i, lab in zip(ids, labels) if lab != -100])
    assert trained == "".join(f"<think>\n{t.reasoning}\n</think>\n\n{t.reply}<|im_end|>\n" for t in traj.turns)
    trainer.train()
    assert math.isfinite(trainer.state.log_history[-1]["train_loss"])


def test_packing_is_safe(tiny_model, tiny_tokenizer):
    """bfd packing (padding-free rows, positions restarting per example) gives each example the loss
    it has alone: transformers builds a block-diagonal mask from the positions for sdpa."""
    import torch
    from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

    texts = ["```python\nclass ModelNew(nn.Module):\n    pass\n```", "def kernel(x_ptr, n):\n    return n * 2 + 1"]
    examples = [{"input_ids": tiny_tokenizer(t)["input_ids"]} for t in texts]
    pad = tiny_tokenizer.pad_token_id
    packed = DataCollatorForLanguageModeling(pad_token_id=pad, padding_free=True)(examples)
    padded = DataCollatorForLanguageModeling(pad_token_id=pad)(examples)
    assert packed["input_ids"].shape[0] == 1 and packed["position_ids"][0].tolist().count(0) == 2
    with torch.no_grad():
        # use_cache=False as in training (SFTTrainer sets it): with a cache transformers skips the
        # packed-sequence detection, and packed examples would attend to each other
        logits_packed = tiny_model(input_ids=packed["input_ids"], position_ids=packed["position_ids"],
                                   use_cache=False).logits[0]
        logits_alone = [tiny_model(input_ids=torch.tensor([e["input_ids"]])).logits[0] for e in examples]
        logits_padded = tiny_model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits
    n0 = len(examples[0]["input_ids"])
    assert torch.allclose(logits_packed[:n0], logits_alone[0], atol=1e-5)
    assert torch.allclose(logits_packed[n0:], logits_alone[1], atol=1e-5)
    assert torch.allclose(logits_padded[1, :len(examples[1]["input_ids"])], logits_alone[1], atol=1e-5)


def test_refused_settings(tmp_path):
    from amdkv.train.sft import check_loss_mask, check_packing

    sft_args, _, _ = parsed(tmp_path, "--packing", "true", "--packing_strategy", "wrapped")
    with pytest.raises(BadInputError, match="attend to each other"):
        check_packing(sft_args)
    sft_args, _, _ = parsed(tmp_path, "--completion_only_loss", "false")
    with pytest.raises(BadInputError, match="train on the prompts"):
        check_loss_mask(sft_args, "prompt_completion")
    sft_args, _, _ = parsed(tmp_path, "--bf16", "true", "--use_cpu", "true")
    from amdkv.train.models import check_precision

    with pytest.raises(BadInputError, match="needs a GPU"):
        check_precision(sft_args)
