"""Supervised fine-tuning with TRL's `SFTTrainer` (DESIGN.md section 6; docs/training.md "SFT").

    accelerate launch --config_file training_configs/accelerate/zero3.yaml train_sft.py \
        --config training_configs/sft_qwen3_8b.yaml

Loss on completions only, always: conversational data (`messages`) trains with
`assistant_only_loss=True` (TRL then swaps in its Qwen3 training template, whose generation
markers cover every assistant turn with its think block and `<|im_end|>`), prompt-completion data
with `completion_only_loss`. A config that turns either off is refused.

Packing (`packing: true`) only where it is safe: TRL's `bfd` strategy packs whole examples into one
row without padding and restarts `position_ids` at each example; the attention must then keep
examples apart, which flash-attention kernels do from the positions and transformers >= 5 does for
`sdpa`/`eager` by building a block-diagonal mask from them (`find_packed_sequence_indices`; tested
in tests/test_train_sft.py: a packed batch's loss equals the unpacked one's). The `wrapped`
strategy cuts examples across rows and lets them attend to each other: refused.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

from amdkv.errors import AmdkvError, BadInputError
from amdkv.train.args import AmdkvSFTArguments, parse_config
from amdkv.train.data import load_sft_source, sft_format
from amdkv.train.distributed import leave_process_group, process_index
from amdkv.train.models import check_precision, load_model, peft_config


def check_loss_mask(sft_args: Any, data_format: str) -> None:
    """Completion-only loss (see the module docstring): set what TRL needs, refuse the opposite."""
    if data_format == "messages":
        if sft_args.completion_only_loss is True:
            raise BadInputError("completion_only_loss applies to prompt-completion data; this dataset is "
                                "conversational", hint="leave completion_only_loss unset; assistant_only_loss is used")
        sft_args.assistant_only_loss = True
    else:
        if sft_args.completion_only_loss is False:
            raise BadInputError("completion_only_loss: false would train on the prompts",
                                hint="amdkv trains on completions only: remove completion_only_loss from the config")
        if sft_args.assistant_only_loss:
            raise BadInputError("assistant_only_loss needs conversational `messages` data; this dataset is "
                                "prompt-completion", hint="remove assistant_only_loss (completion_only_loss is used)")
        sft_args.completion_only_loss = True


def check_packing(sft_args: Any) -> None:
    """Packing only with the `bfd` strategies (see the module docstring)."""
    if sft_args.packing and sft_args.packing_strategy not in ("bfd", "bfd_split"):
        raise BadInputError(f"packing_strategy={sft_args.packing_strategy!r} lets packed examples attend to each other",
                            hint="use packing_strategy: bfd (examples kept whole, positions restart per example)")


def build_sft_trainer(sft_args: Any, model_args: Any, amdkv_args: AmdkvSFTArguments, *, train_dataset: Any = None,
                      model: Any = None, tokenizer: Any = None, callbacks: Sequence[Any] | None = None) -> Any:
    """An `SFTTrainer` for a parsed config; `train_dataset`, `model` and `tokenizer` override the
    config's (tests and benchmarks pass their own)."""
    from trl import SFTTrainer

    check_precision(sft_args)
    check_packing(sft_args)
    if model is None:
        model, tokenizer = load_model(model_args, sft_args, amdkv_args.tiny_model)
    if tokenizer is None:
        raise BadInputError("a model object needs its tokenizer", hint="pass tokenizer= with model=")
    if train_dataset is None:
        train_dataset = load_sft_source(
            amdkv_args.dataset, dataset_config=amdkv_args.dataset_config, split=amdkv_args.dataset_split,
            reference_solutions=amdkv_args.reference_solutions, prompt_config=amdkv_args.prompt_config(),
            system_prompt=amdkv_args.system_prompt,
            trajectory_target=amdkv_args.trajectory_target, reasoning=amdkv_args.reasoning,
            max_examples=amdkv_args.max_examples)
    check_loss_mask(sft_args, sft_format(train_dataset.column_names))
    return SFTTrainer(model=model, args=sft_args, train_dataset=train_dataset, processing_class=tokenizer,
                      peft_config=peft_config(model_args), callbacks=list(callbacks or []))


def resume_arg(value: Any) -> Any:
    """`resume_from_checkpoint` as the Trainer takes it: a path, or True for the latest checkpoint
    of output_dir (`true`/`latest` in a config)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "latest", "yes", "1"):
        return True
    return value or None


def run(trainer: Any, trl_args: Any) -> None:
    """Train (resuming when asked), then save the final model and tokenizer to output_dir."""
    trainer.train(resume_from_checkpoint=resume_arg(trl_args.resume_from_checkpoint))
    trainer.save_model(trl_args.output_dir)


def main(argv: Sequence[str] | None = None) -> int:
    from trl import SFTConfig

    try:
        sft_args, model_args, amdkv_args = parse_config(SFTConfig, AmdkvSFTArguments, argv)
        run(build_sft_trainer(sft_args, model_args, amdkv_args), sft_args)
    except AmdkvError as exc:
        print(f"error (rank {process_index()}): {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        leave_process_group()
    return 0
