"""Wrong, and hides it: the kernel's unmasked tail load runs past the end of the input, and a
`return` inside `finally` swallows the exception the refused access raises, so forward returns
normally (the output's tail block is never written). The worker reads the bounds checker's own
record, not the exception, so the verdict is still the out-of-bounds access."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.zeros_like(x)
        n = x.numel()
        try:
            _relu[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        finally:
            return out
