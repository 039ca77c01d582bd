"""The candidate worker's host copies (amdkv/verify/worker_jobs.py): an output or mutated input
reaches the parent as a CPU tensor that shares nothing with what the candidate holds, made with one
copy on every device (session 9 replaced `.cpu().clone()`, two copies on a GPU)."""

from __future__ import annotations

import torch

from amdkv.verify.runtime_guards import guarded_copy
from amdkv.verify.worker_jobs import _detach_leaves, _host_copy


def test_host_copy_shares_no_memory_on_cpu():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    c = _host_copy(t)
    assert c.device.type == "cpu" and torch.equal(c, t)
    assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    t.add_(1)  # the candidate changing its tensor afterwards does not change what was reported
    assert c[0, 0].item() == 0.0


def test_host_copy_keeps_strides_and_copies_only_the_view():
    t = torch.randn(4, 6).t()  # a transposed (non-contiguous) output keeps its layout
    assert _host_copy(t).stride() == t.stride()
    view, raw, _ = guarded_copy(torch.randn(5, 7))  # an input inside its guard-byte buffer
    c = _host_copy(view)
    assert torch.equal(c, view) and c.untyped_storage().nbytes() == view.numel() * view.element_size()
    assert c.untyped_storage().nbytes() < raw.untyped_storage().nbytes()


def test_detach_leaves_copies_plain_tensors_and_keeps_scalars():
    a, b = torch.ones(3, requires_grad=True), torch.zeros(2)
    leaves = _detach_leaves((a * 2, [b, 3]))  # nested tuples/lists are flattened
    assert [type(x) for x in leaves] == [torch.Tensor, torch.Tensor, int]
    assert not leaves[0].requires_grad and leaves[1].untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
