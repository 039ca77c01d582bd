"""Correct: the kernel is built inside a factory function (a closure over a constexpr) and uses
module-level constants."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 256
NEG_SLOPE = tl.constexpr(0.0)


def make_kernel(block):
    @triton.jit
    def _leaky(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, tl.where(x > 0, x, x * NEG_SLOPE), mask=mask)

    return _leaky, block


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel, self.block = make_kernel(BLOCK_SIZE)

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        self.kernel[(triton.cdiv(x.numel(), self.block),)](x, out, x.numel(), BLOCK=self.block)
        return out
