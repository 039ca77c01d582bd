"""Correct: writes into a padded buffer (row pitch rounded up to 64) and returns a slice of it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_pitched(x_ptr, out_ptr, N, PITCH, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N)
        tl.store(out_ptr + row * PITCH + cols, tl.maximum(x, 0.0), mask=cols < N)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        pitch = triton.cdiv(N, 64) * 64
        buf = torch.empty((M, pitch), dtype=x.dtype, device=x.device)
        _relu_pitched[(M,)](x, buf, N, pitch, BLOCK=512)
        return buf[:, :N]
