"""Correct: the tiny-valued task computed in a kernel (the policy must not be too strict)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

SCALE = 3.0e-7


@triton.jit
def _scale(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _scale[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), SCALE, BLOCK=1024)
        return out
