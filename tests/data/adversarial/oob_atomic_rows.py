"""Wrong: each program sums BLOCK_M rows and adds them into the output with one vector atomic that
has no row mask, so the last block's atomics run past the end of the output (rows >= M)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    tl.atomic_add(out_ptr + rows, tl.sum(x, axis=1))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.zeros(M, dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(M, 8), triton.cdiv(N, 128))
        _row_sum[grid](x, out, M, N, BLOCK_M=8, BLOCK_N=128)
        return out
