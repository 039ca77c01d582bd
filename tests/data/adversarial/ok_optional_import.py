"""Correct: a harmless try/except around an optional import at module level."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra import cuda_only_helpers_that_do_not_exist  # noqa: F401
    HAVE_HELPERS = True
except ImportError:
    HAVE_HELPERS = False


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > 0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 512),)](x, out, x.numel(), BLOCK=512)
        return out
