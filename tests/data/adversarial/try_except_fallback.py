"""Cheat: tries a kernel and silently falls back to PyTorch when it fails."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        try:
            _relu[(triton.cdiv(x.numel(), 1000),)](x, out, x.numel(), BLOCK=1000)  # fails: not a power of 2
        except Exception:
            out = x.clamp(min=0)
        return out
