"""Wrong: every program also stores its block's maximum at out_ptr - 1, a scratch slot the model
forgot to allocate: a store before the start of the output (into the allocator's memory)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.maximum(tl.load(x_ptr + offs, mask=mask, other=0.0), 0.0)
    tl.store(out_ptr + offs, y, mask=mask)
    tl.store(out_ptr - 1, tl.max(y, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
