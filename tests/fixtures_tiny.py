"""Session-wide tiny Qwen3 tokenizer and model (amdkv.train.tiny_model), for training, generation and
serving tests.

Use: `from fixtures_tiny import tiny_tokenizer, tiny_model, fresh_tiny_model  # noqa: F401` in a test
module (tests/ is on sys.path when pytest runs). The objects are built once per process (the
builders are cached), whichever modules import the fixtures. `tiny_model` is shared: never train it
in place; take `fresh_tiny_model` (a new random model, ~0.1 s) for anything that changes weights.
"""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def _tokenizer():
    from amdkv.train.tiny_model import build_tokenizer

    return build_tokenizer()


@functools.lru_cache(maxsize=1)
def _model():
    from amdkv.train.tiny_model import build_model

    return build_model(_tokenizer())


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """Byte-level BPE on the bundled tasks and solutions, ChatML tokens, TRL's qwen3.jinja template."""
    pytest.importorskip("transformers", reason="the tiny model needs transformers (pip install 'amdkv[train]')")
    pytest.importorskip("trl", reason="the tiny tokenizer uses TRL's Qwen3 chat template (pip install 'amdkv[train]')")
    return _tokenizer()


@pytest.fixture(scope="session")
def tiny_model(tiny_tokenizer):
    """A random Qwen3ForCausalLM (hidden 64, 2 layers): shared, read-only."""
    return _model()


@pytest.fixture
def fresh_tiny_model(tiny_tokenizer):
    """A new random Qwen3ForCausalLM for a test that trains it."""
    from amdkv.train.tiny_model import build_model

    return build_model(tiny_tokenizer)
