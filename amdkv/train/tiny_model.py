"""A tiny, randomly initialised Qwen3 model and its tokenizer, built offline in seconds on a CPU.

Why: tests of training, generation and serving need a real model and a real tokenizer that
behave like Qwen3's (ChatML turns, `<think>` blocks, TRL's Qwen3 chat template), and a GPU smoke
run needs a 10-30 M parameter model, without reaching the Hugging Face Hub.

- `build_tokenizer(texts, vocab_size=...)`: a byte-level BPE trained with `tokenizers` on `texts`
  (any string can be encoded: byte fallback by construction), ChatML special tokens
  (`<|endoftext|>`, `<|im_start|>`, `<|im_end|>`) and Qwen3's added tokens (`<think>`,
  `</think>`, `<tool_call>`, ...), wrapped in `PreTrainedTokenizerFast`. Its chat template is
  TRL's `chat_templates/qwen3.jinja` read byte for byte, so TRL recognises it as Qwen3 and swaps
  in its training variant (`qwen3_training.jinja`) exactly as it would for the real model.
- `build_model(tokenizer, hidden_size=64, layers=2, ...)`: `Qwen3ForCausalLM` with random weights,
  vocabulary and special-token ids taken from the tokenizer.
- `default_corpus()`: text to train the tokenizer on (the bundled tasks, reference solutions and
  prompt templates, so kernels and prompts tokenise into sensible pieces); no download.

Presets (`PRESETS`, parameters counted with tied embeddings on the default corpus, whose BPE
stops at about 4.3 k tokens whatever larger `vocab_size` is asked): `unit` (hidden 64, 2 layers,
0.34 M: unit tests, seconds on a CPU) and `smoke` (hidden 512, 6 layers, 21.1 M: a GPU smoke run).
`python -m amdkv.train.tiny_model --preset smoke --out DIR` writes tokenizer and model to DIR
(`from_pretrained(DIR)` then loads them anywhere, offline).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # heavy imports only for type checkers; the functions import them when called
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

# Qwen3's special tokens (the real tokenizer's `added_tokens`): ChatML markers are special
# (skipped when decoding with skip_special_tokens); the reasoning/tool markers are not, as in Qwen3,
# so a decoded reply keeps its `<think>` block.
CHATML_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
QWEN3_TEXT_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"


@dataclasses.dataclass(frozen=True)
class TinySize:
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    intermediate_size: int


PRESETS = {
    "unit": TinySize(vocab_size=4096, hidden_size=64, layers=2, heads=4, kv_heads=2, intermediate_size=128),
    "smoke": TinySize(vocab_size=8192, hidden_size=512, layers=6, heads=8, kv_heads=4, intermediate_size=1536),
}


def qwen3_chat_template() -> str:
    """TRL's Qwen3 chat template, exactly as TRL ships it (TRL compares templates by equality).

    Read from TRL's package folder without importing TRL (its import takes ~10 s on a small machine)."""
    return _trl_chat_template_file("qwen3.jinja").read_text(encoding="utf-8")


def _trl_chat_template_file(name: str) -> Path:
    import importlib.util

    from amdkv.errors import BadInputError

    spec = importlib.util.find_spec("trl")
    if spec is None or not spec.submodule_search_locations:
        raise BadInputError("TRL is not installed; the tiny tokenizer uses TRL's Qwen3 chat template",
                            hint="pip install 'amdkv[train]' (trl>=1.16)")
    path = Path(next(iter(spec.submodule_search_locations))) / "chat_templates" / name
    if not path.is_file():
        raise BadInputError(f"this TRL has no chat_templates/{name}", hint="install trl>=1.16")
    return path


def default_corpus() -> list[str]:
    """The bundled task files, reference solutions and prompt templates: the code and prose that
    prompts and replies are made of, so they tokenise into few tokens (and tests stay fast)."""
    from amdkv.tasks import builtin

    templates = Path(__file__).resolve().parent.parent / "prompts" / "templates"
    files = (list(builtin.task_files()) + sorted(builtin.SOLUTIONS_ROOT.glob("*/*.py"))
             + sorted(templates.glob("*/*.md")))
    return [p.read_text(encoding="utf-8") for p in files]


def build_tokenizer(texts: Iterable[str] | None = None, vocab_size: int = 4096) -> "PreTrainedTokenizerFast":
    """Train a byte-level BPE on `texts` (default: `default_corpus()`) and wrap it for transformers.

    Deterministic for the same texts and vocab_size. `vocab_size` counts the 256 byte symbols, the
    merges and the added tokens; it must leave room for at least the bytes and added tokens.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from amdkv.errors import BadInputError

    added = len(CHATML_SPECIAL_TOKENS) + len(QWEN3_TEXT_TOKENS)
    if vocab_size < 256 + added:
        raise BadInputError(f"vocab_size={vocab_size} is too small for a byte-level BPE",
                            hint=f"use at least {256 + added} (256 bytes + {added} special tokens)")
    corpus = list(texts) if texts is not None else default_corpus()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(CHATML_SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in QWEN3_TEXT_TOKENS])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN,
                                   additional_special_tokens=[CHATML_SPECIAL_TOKENS[1]],
                                   clean_up_tokenization_spaces=False)
    fast.chat_template = qwen3_chat_template()
    fast.padding_side = "left"  # what TRL's GRPOTrainer requires of its processing class
    return fast


def build_model(tokenizer: "PreTrainedTokenizerFast", hidden_size: int = 64, layers: int = 2, *,
                heads: int = 4, kv_heads: int = 2, intermediate_size: int | None = None,
                max_position_embeddings: int = 4096, seed: int = 0) -> "Qwen3ForCausalLM":
    """A randomly initialised `Qwen3ForCausalLM` sized for `tokenizer` (seeded, float32, eval mode off).

    `hidden_size` must be a multiple of `heads`; `heads` a multiple of `kv_heads` (grouped-query
    attention as in Qwen3). `intermediate_size` defaults to 2 × hidden (Qwen3 uses ≈ 3×; the
    ratio does not matter for a random model).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from amdkv.errors import BadInputError

    if hidden_size % heads or heads % kv_heads:
        raise BadInputError(f"hidden_size={hidden_size}, heads={heads}, kv_heads={kv_heads} do not divide",
                            hint="hidden_size must be a multiple of heads, heads a multiple of kv_heads")
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=hidden_size // heads, max_position_embeddings=max_position_embeddings, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_preset(preset: str = "unit", texts: Iterable[str] | None = None):
    """`(tokenizer, model)` of a preset size (see `PRESETS`)."""
    from amdkv.errors import BadInputError

    if preset not in PRESETS:
        raise BadInputError(f"unknown tiny-model preset {preset!r}", hint=f"use one of {', '.join(PRESETS)}")
    size = PRESETS[preset]
    tokenizer = build_tokenizer(texts, vocab_size=size.vocab_size)
    model = build_model(tokenizer, size.hidden_size, size.layers, heads=size.heads, kv_heads=size.kv_heads,
                        intermediate_size=size.intermediate_size)
    return tokenizer, model


def save_preset(out_dir: str | Path, preset: str = "unit") -> Path:
    """Write a preset's tokenizer and model to `out_dir` (loadable with `from_pretrained`)."""
    out = Path(out_dir)
    tokenizer, model = build_preset(preset)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(out)
    model.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a tiny random Qwen3 model and its tokenizer to a folder.")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--preset", default="smoke", choices=sorted(PRESETS))
    args = parser.parse_args(argv)
    out = save_preset(args.out, args.preset)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
