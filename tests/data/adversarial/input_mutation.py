"""Wrong: computes ReLU in place in the input, then copies it out (the input comes back modified)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(x_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        _relu_inplace[grid](x, n, BLOCK=1024)
        out = torch.empty_like(x)
        _copy[grid](x, out, n, BLOCK=1024)
        return out
