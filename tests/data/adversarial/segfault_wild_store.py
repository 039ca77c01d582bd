"""Crash: a kernel stores far outside any allocation (a wild pointer), which segfaults the process."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_wild(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    far = offs.to(tl.int64) + (1 << 40)
    tl.store(out_ptr + far, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _relu_wild[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
