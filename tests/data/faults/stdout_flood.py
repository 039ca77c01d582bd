"""Fault: prints 1 GiB in forward, then computes a correct relu. Printing is no failure (ok); the
worker keeps only the tail of what was printed, so its memory stays bounded."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        line = "x" * (1 << 20)
        for _ in range(1024):
            print(line)
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
