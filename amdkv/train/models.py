"""The model and tokenizer a training config names, shared by SFT and RL.

- `model_name_or_path` (trl.ModelConfig), when set: the tokenizer is loaded here (left padding, as
  GRPO needs) and the model is handed to the TRL trainer as its id, with `dtype`,
  `attn_implementation` and `revision` as `model_init_kwargs`, so TRL loads it itself (under
  DeepSpeed ZeRO-3 the weights are then partitioned while loading, never whole on one GPU);
- otherwise `amdkv.tiny_model: unit|smoke`: a random tiny Qwen3 and its tokenizer built in-process
  (amdkv.train.tiny_model; CI and smoke runs, no download), seeded with the run's seed so every
  rank builds the same weights (a saved one, e.g. an SFT result, is a `model_name_or_path`).
LoRA: `use_peft: true` and the `lora_*` fields of trl.ModelConfig, through `trl.get_peft_config`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from amdkv.errors import BadInputError


def check_precision(trl_args: Any) -> None:
    """bf16/fp16 need a GPU: say so plainly (TRL's own message is "Your setup doesn't support bf16/gpu")."""
    import torch

    if (getattr(trl_args, "bf16", False) or getattr(trl_args, "fp16", False)) and \
            (getattr(trl_args, "use_cpu", False) or not torch.cuda.is_available()):
        raise BadInputError("bf16/fp16 training needs a GPU, and this run is on the CPU",
                            hint="set bf16: false (and use_cpu: true) in CPU configs, "
                                 "e.g. training_configs/*_tiny_cpu.yaml")


def load_model(model_args: Any, trl_args: Any, tiny_model: str | None) -> tuple[Any, Any]:
    """(model or model id, tokenizer) for a TRL trainer (see the module docstring)."""
    if tiny_model and not model_args.model_name_or_path:
        from amdkv.train.tiny_model import PRESETS, build_model, build_tokenizer

        if tiny_model not in PRESETS:
            raise BadInputError(f"amdkv.tiny_model={tiny_model!r}", hint=f"use one of {', '.join(PRESETS)}")
        size = PRESETS[tiny_model]
        tokenizer = build_tokenizer(vocab_size=size.vocab_size)
        model = build_model(tokenizer, size.hidden_size, size.layers, heads=size.heads, kv_heads=size.kv_heads,
                            intermediate_size=size.intermediate_size, seed=trl_args.seed)
        return model, tokenizer
    if not model_args.model_name_or_path:
        raise BadInputError("the config names no model",
                            hint="set model_name_or_path (e.g. Qwen/Qwen3-8B) or amdkv.tiny_model: unit")
    from transformers import AutoTokenizer

    init = dict(trl_args.model_init_kwargs or {})
    # TRL 1.16's ModelConfig has no trust_remote_code: it is a model_init_kwargs entry (default off)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision,
                                              trust_remote_code=bool(init.get("trust_remote_code", False)))
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    init.setdefault("revision", model_args.model_revision)
    if model_args.dtype is not None:
        init.setdefault("dtype", model_args.dtype)
    if model_args.attn_implementation is not None:
        init.setdefault("attn_implementation", model_args.attn_implementation)
    trl_args.model_init_kwargs = init
    return model_args.model_name_or_path, tokenizer


def peft_config(model_args: Any) -> Any:
    """LoRA settings from trl.ModelConfig (None unless use_peft)."""
    from trl import get_peft_config

    return get_peft_config(model_args)


@contextlib.contextmanager
def plain_forward(model: Any) -> Iterator[Any]:
    """Within the block, `model` runs its own forward, without the autocast wrapper accelerate puts
    on a model it prepares for bf16/fp16 mixed precision (`model._original_forward` keeps the one
    it replaced); outside, the wrapper is back. A model accelerate did not wrap (no mixed
    precision, DeepSpeed, a model loaded in bf16) is left as it is.

    Why: generating with a preallocated (static) KV cache from an fp32 model under CUDA autocast
    mixes dtypes: the cache is allocated from the first step's key/value tensors and a later,
    compiled decoding step hands it bf16 ones ("index_copy_(): self and source expected to have
    the same dtype ... Float and BFloat16", the H200 learning run of 2026-12-02). Generating in the
    weights' own dtype keeps every tensor of the cache in one dtype; an evaluation then also scores
    the model exactly as it is saved."""
    wrapper = model.__dict__.get("forward")
    original = model.__dict__.get("_original_forward")
    if wrapper is None or original is None:
        yield model
        return
    model.forward = original
    try:
        yield model
    finally:
        model.forward = wrapper
