"""RL (GRPO) entry point for `accelerate launch` (the logic lives in amdkv.train.rl; docs/training.md).

    amdkv serve --device rocm --jobs 16 &                     # one verification service per node
    accelerate launch --config_file training_configs/accelerate/zero3.yaml train_rl.py \
        --config training_configs/rl_qwen3_8b.yaml [--amdkv.verifier.url http://127.0.0.1:8765]
"""

import sys

from amdkv.train.rl import main

if __name__ == "__main__":
    sys.exit(main())
