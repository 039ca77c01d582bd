"""Wrong: a kernel that never terminates on any platform. Its 64-bit counter cannot wrap in any
realistic time (infinite_loop.py's 32-bit one wraps after 2**31 steps, about a second on a GPU)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin64(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.full((), 0, tl.int64)
    while i >= 0:
        i += 1
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _spin64[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
