"""Generation runs the model's own forward, not the autocast wrapper accelerate puts on a model
it prepares for mixed precision (amdkv.train.models.plain_forward; the H200 learning run of
2026-12-02 failed in a static KV cache under that wrapper). CPU bf16 autocast stands in for CUDA's:
the wrapper is the same code on both."""

from __future__ import annotations

import pytest
import torch

from amdkv.train.evaluate import generate_replies
from amdkv.train.models import plain_forward
from fixtures_tiny import fresh_tiny_model, tiny_tokenizer  # noqa: F401


@pytest.fixture
def bf16_prepared(fresh_tiny_model):
    """The tiny model prepared by a real bf16 Accelerator on the CPU (accelerate's own wrapping).
    accelerate keeps one process-wide state, which a Trainer in an earlier test of this process set
    to no mixed precision: it is reset before and after."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    model = Accelerator(mixed_precision="bf16", cpu=True).prepare(fresh_tiny_model)
    yield model
    AcceleratorState._reset_state(reset_partial_state=True)


def autocast_seen(model) -> list[bool]:
    """Whether CPU autocast was on in each call of the first attention projection (a forward hook)."""
    seen: list[bool] = []
    layer = model.model.layers[0].self_attn.q_proj
    layer.register_forward_hook(lambda *_: seen.append(torch.is_autocast_enabled("cpu")))
    return seen


def test_plain_forward_lifts_the_autocast_wrapper_and_puts_it_back(bf16_prepared):
    seen = autocast_seen(bf16_prepared)
    ids = torch.tensor([[1, 2, 3]])
    bf16_prepared(ids)
    with plain_forward(bf16_prepared) as model:
        assert model is bf16_prepared
        bf16_prepared(ids)
    bf16_prepared(ids)
    assert seen == [True, False, True]


def test_a_model_accelerate_did_not_wrap_is_left_alone(fresh_tiny_model):
    before = dict(fresh_tiny_model.__dict__)
    with plain_forward(fresh_tiny_model):
        assert "forward" not in fresh_tiny_model.__dict__
    assert fresh_tiny_model.__dict__.keys() == before.keys()


def test_evaluation_generates_without_autocast(bf16_prepared, tiny_tokenizer):
    seen = autocast_seen(bf16_prepared)
    replies = generate_replies(bf16_prepared, tiny_tokenizer, [[{"role": "user", "content": "add two tensors"}]],
                               max_new_tokens=3, cache_implementation="static")
    assert len(replies) == 1 and seen and not any(seen)
    bf16_prepared(torch.tensor([[1, 2]]))
    assert seen[-1] is True  # the trainer's wrapper is back after generating
