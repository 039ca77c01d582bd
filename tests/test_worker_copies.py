"""The candidate worker's host copies (amdkv/verify/worker_jobs.py): an output or mutated input
reaches the parent as a CPU tensor that shares nothing with what the candidate holds, made with one
copy on every device (session 9 replaced `.cpu().clone()`, two copies on a GPU)."""

from __future__ import annotations

import torch

from amdkv.verify.runtime_guards import guarded_copy
from amdkv.verify.worker_jobs import _detach_leaves, _host_copy, verifier_copies_note


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


def test_an_out_of_memory_error_names_the_verifiers_own_copies_of_the_inputs():
    """A candidate that ran out of device memory stays `runtime_error`/`oom`, but the message says what
    the verifier held: every resident trial's inputs (nested too) plus the copy a checked call or the
    timing made. Meta tensors stand for device tensors here (no GPU on this machine): they have a
    size and a non-cpu device, and no memory."""
    gib = 2 ** 30
    trials = [[torch.empty(gib // 4, device="meta"), [torch.empty(gib // 2, dtype=torch.float16, device="meta")], 3],
              [torch.empty(gib // 4, device="meta"), [torch.empty(gib // 2, dtype=torch.float16, device="meta")], 3]]
    note = verifier_copies_note(trials, "the checked call's guarded copy")
    assert "held 6.00 GiB" in note and "4.00 GiB of resident trial inputs" in note
    assert "2.00 GiB for the checked call's guarded copy" in note
    alone = verifier_copies_note(trials[:1], "")
    assert "held 2.00 GiB" in alone and " for " not in alone
    # host tensors (the cpu platform, or inputs not resident): the verifier held nothing on a device
    assert verifier_copies_note([[torch.ones(4)]], "the timing's clone") == ""
    assert verifier_copies_note([], "the checked call's guarded copy") == ""  # failed before the inputs moved
