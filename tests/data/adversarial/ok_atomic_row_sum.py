"""Correct: split each row into chunks; every program atomically adds its partial sum into a
torch.zeros output."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum_partial(x_ptr, out_ptr, N, CHUNK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.atomic_add(out_ptr + row, tl.sum(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.zeros(M, dtype=x.dtype, device=x.device)
        _row_sum_partial[(M, triton.cdiv(N, 64))](x, out, N, CHUNK=64)
        return out
