"""The shared tiny Qwen3 model and tokenizer (amdkv.train.tiny_model), offline."""

from __future__ import annotations

import pytest

from amdkv.errors import BadInputError

from fixtures_tiny import tiny_model, tiny_tokenizer  # noqa: F401  (session fixtures)

pytest.importorskip("trl", reason="the tiny tokenizer uses TRL's Qwen3 chat template (pip install 'amdkv[train]')")


def test_tokenizer_is_recognised_by_trl_as_qwen3(tiny_tokenizer):
    from trl.chat_template_utils import (get_training_chat_template, is_chat_template_prefix_preserving,
                                         is_chat_template_stop_token_trained, qwen3_chat_template,
                                         qwen3_training_chat_template)

    assert tiny_tokenizer.chat_template == qwen3_chat_template
    assert get_training_chat_template(tiny_tokenizer) == qwen3_training_chat_template
    assert not is_chat_template_prefix_preserving(tiny_tokenizer)  # the stock template drops old think blocks
    assert is_chat_template_stop_token_trained(tiny_tokenizer, chat_template=qwen3_training_chat_template)


def test_special_tokens_and_byte_level_round_trip(tiny_tokenizer):
    tok = tiny_tokenizer
    assert (tok.eos_token, tok.pad_token, tok.padding_side) == ("<|im_end|>", "<|endoftext|>", "left")
    for marker in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>"):
        assert len(tok(marker, add_special_tokens=False)["input_ids"]) == 1, marker
    text = "x = tl.load(ptr + offs) # héllo 中文 ∑ \t\n<think>\nwhy</think>"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text
    kept = tok.decode(tok("<|im_start|>a<think>b</think><|im_end|>")["input_ids"], skip_special_tokens=True)
    assert kept == "a<think>b</think>"  # reasoning markers are not special tokens (as in Qwen3)


def test_tokenizer_is_deterministic_and_saves(tiny_tokenizer, tmp_path):
    from transformers import AutoTokenizer

    from amdkv.train.tiny_model import build_tokenizer

    again = build_tokenizer()
    assert again.get_vocab() == tiny_tokenizer.get_vocab()
    tiny_tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.chat_template == tiny_tokenizer.chat_template
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "reasoning_content": "r"}]
    assert loaded.apply_chat_template(msgs, tokenize=False) == tiny_tokenizer.apply_chat_template(msgs, tokenize=False)


def test_model_runs_and_generates(tiny_model, tiny_tokenizer):
    import torch

    assert type(tiny_model).__name__ == "Qwen3ForCausalLM"
    assert tiny_model.config.vocab_size == len(tiny_tokenizer)
    assert 0.1e6 < sum(p.numel() for p in tiny_model.parameters()) < 1e6
    ids = tiny_tokenizer.apply_chat_template([{"role": "user", "content": "write relu"}], add_generation_prompt=True,
                                             return_tensors="pt", return_dict=True)["input_ids"]
    with torch.no_grad():
        logits = tiny_model(ids).logits
        out = tiny_model.generate(ids, max_new_tokens=5, do_sample=False)
    assert logits.shape == (1, ids.shape[1], len(tiny_tokenizer))
    assert out.shape[1] <= ids.shape[1] + 5 and torch.equal(out[0, :ids.shape[1]], ids[0])


def test_presets_and_saved_folder(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from amdkv.train.tiny_model import PRESETS, build_model, build_tokenizer, save_preset

    smoke = PRESETS["smoke"]
    tok = build_tokenizer(vocab_size=smoke.vocab_size)
    model = build_model(tok, smoke.hidden_size, smoke.layers, heads=smoke.heads, kv_heads=smoke.kv_heads,
                        intermediate_size=smoke.intermediate_size)
    assert 10e6 <= sum(p.numel() for p in model.parameters()) <= 30e6  # what a GPU smoke run asks for
    out = save_preset(tmp_path / "unit", "unit")
    assert type(AutoModelForCausalLM.from_pretrained(out)).__name__ == "Qwen3ForCausalLM"
    assert AutoTokenizer.from_pretrained(out).eos_token == "<|im_end|>"


def test_bad_sizes_are_refused(tiny_tokenizer):
    from amdkv.train.tiny_model import build_model, build_preset, build_tokenizer

    with pytest.raises(BadInputError, match="vocab_size"):
        build_tokenizer(["abc"], vocab_size=100)
    with pytest.raises(BadInputError, match="divide"):
        build_model(tiny_tokenizer, hidden_size=66, heads=4)
    with pytest.raises(BadInputError, match="preset"):
        build_preset("huge")
