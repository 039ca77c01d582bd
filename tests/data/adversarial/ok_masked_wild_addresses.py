"""Correct: masked-off lanes get wild addresses (2**40 elements away, and negative) that are
computed but never touched; only lanes whose mask is true count."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    wild = tl.where(mask, offs.to(tl.int64), offs.to(tl.int64) + (1 << 40))
    below = tl.where(mask, offs, -offs - 1)
    x = tl.load(x_ptr + wild, mask=mask, other=0.0)
    tl.store(out_ptr + below, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
