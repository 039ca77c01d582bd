"""Correct: a @triton.jit helper called from an @triton.autotune kernel with two configs, and a
Python helper that computes the grid."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_value(x):
    return tl.maximum(x, 0.0)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 256}, num_warps=2), triton.Config({"BLOCK": 1024}, num_warps=4)],
    key=["n"],
)
@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, _relu_value(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def _grid(n):
    return lambda meta: (triton.cdiv(n, meta["BLOCK"]),)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _relu[_grid(x.numel())](x, out, x.numel())
        return out
