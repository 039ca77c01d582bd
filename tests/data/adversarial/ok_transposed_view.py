"""Correct: the kernel writes ReLU(x) transposed into an (N, M) buffer and returns its .t() view
(fresh memory, non-contiguous)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_t(x_ptr, out_t_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask)
    tl.store(out_t_ptr + cols[None, :] * M + rows[:, None], tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out_t = torch.empty((N, M), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 128))
        _relu_t[grid](x, out_t, M, N, BM=32, BN=128)
        return out_t.t()
