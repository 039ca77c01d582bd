#!/usr/bin/env bash
# Wheels that benchmarks/gen_gpu.py needs on the GPU machine (Python 3.12, x86-64, no network there):
# the openai client, transformers serve's [serving] extra, and TRL (only its chat-template file).
# Run here (PyPI reachable), carry the folder, pass it as --wheels.
set -euo pipefail
DIR="${1:-wheels}"
mkdir -p "$DIR"
PIP="${PIP:-/work/main/.venv/bin/pip}"
$PIP download --quiet --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d "$DIR" openai fastapi uvicorn pydantic
$PIP download --quiet --only-binary=:all: --no-deps -d "$DIR" "trl==1.16.*"
ls -la "$DIR"
du -sh "$DIR"
