"""SFT entry point for `accelerate launch` (the logic lives in amdkv.train.sft; docs/training.md).

    accelerate launch --config_file training_configs/accelerate/zero3.yaml train_sft.py \
        --config training_configs/sft_qwen3_8b.yaml [--learning_rate 1e-5] [--amdkv.max_examples 1000]
"""

import sys

from amdkv.train.sft import main

if __name__ == "__main__":
    sys.exit(main())
