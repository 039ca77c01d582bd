"""Wrong: writes zeros. On a task whose outputs are ~1e-6 an absolute 1e-5 tolerance would pass it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _fill_zero(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = out.numel()
        _fill_zero[(triton.cdiv(n, 1024),)](out, n, BLOCK=1024)
        return out
