# Two entry points (README): `make demo` runs the main job on the bundled default data,
# `make test` runs the tests. Both install what they need into .venv/ first (idempotent).
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.amdkv-installed
TORCH   := torch==2.13.0
TRITON  := triton==3.6.0
# numpy 2.4 turned int(1-element array) into an error, which broke loops over scalar kernel
# arguments under the Triton 3.6 interpreter (measured 2026-11-29; amdkv pinned numpy<2.4 until
# session 28). verify/interpreter_numpy.py mends that; the tests run on the newest numpy for Python
# 3.11 on PyPI here, so a NumPy 2.4+ regression shows in CI.
NUMPY   := numpy==2.4.6

.PHONY: install demo test clean toolchain-hip

$(VPY):
	$(PY) -m venv $(VENV)

# torch first (pinned, local CPU wheel on our machines): a bare `torch` would pull a CUDA build.
$(STAMP): $(VPY) pyproject.toml
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q $(TORCH)
	$(VPY) -m pip install -q $(TRITON) $(NUMPY)
	$(VPY) -m pip install -q -e ".[test,serve]"
	touch $(STAMP)

install: $(STAMP)

# The main job: verify the bundled solutions, build the Hub-layout Triton dataset from them
# (interpreter-verified on a machine without a GPU) and read it back with load_dataset.
demo: $(STAMP)
	rm -rf build/demo-records
	$(VENV)/bin/amdkv demo --records build/demo-records
	$(VENV)/bin/amdkv build triton --records build/demo-records --out build/amdkv-triton --overwrite
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(VENV)/bin/python -m amdkv.data.demo build/amdkv-triton

# Both cores (pytest-xdist, one test file per worker: module fixtures stay in one process), files in
# the order tests/conftest.py gives them (slowest first); the 25 slowest tests are listed so CI logs
# show where the time goes.
test: $(STAMP)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 $(VENV)/bin/python -m pytest -q -ra \
	  -n 2 --dist loadfile --no-loadscope-reorder --durations=25 tests

# Real hipcc 7 (gfx90a/gfx942/gfx950) in a Debian sid chroot; idempotent, needs root (docs/amd_compile.md).
toolchain-hip: $(STAMP)
	$(VENV)/bin/amdkv toolchain install hip --torch-ext

clean:
	rm -rf $(VENV) build *.egg-info
