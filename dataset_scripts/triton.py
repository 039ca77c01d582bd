"""The amdkv/triton dataset's whole chain from dataset_scripts/triton.yaml (amdkv/data/scripts.py).

    python dataset_scripts/triton.py [--steps generate,build] [--publish [--dry-run]]
"""

from pathlib import Path

from amdkv.data.scripts import main

if __name__ == "__main__":
    raise SystemExit(main(Path(__file__).with_suffix(".yaml")))
