"""Correct: the kernel gets the even and the odd columns of the input as two strided views (each
spanning from its first to its last element, gaps included) plus a transposed output buffer, and
reads every element of both views, including the last byte of the input."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_split(even_ptr, odd_ptr, out_t_ptr, M, N, n_even, n_odd, s_row, s_col,
                BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    in_rows = rows[:, None] < M
    e_mask = in_rows & (cols[None, :] < n_even)
    o_mask = in_rows & (cols[None, :] < n_odd)
    e = tl.load(even_ptr + rows[:, None] * s_row + cols[None, :] * s_col, mask=e_mask)
    o = tl.load(odd_ptr + rows[:, None] * s_row + cols[None, :] * s_col, mask=o_mask)
    # out_t is (N, M): column j of x is row j of out_t
    tl.store(out_t_ptr + (2 * cols[None, :]) * M + rows[:, None], tl.maximum(e, 0.0), mask=e_mask)
    tl.store(out_t_ptr + (2 * cols[None, :] + 1) * M + rows[:, None], tl.maximum(o, 0.0), mask=o_mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        even, odd = x[:, 0::2], x[:, 1::2]
        out_t = torch.empty((N, M), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(M, 32), triton.cdiv(even.shape[1], 64))
        _relu_split[grid](even, odd, out_t, M, N, even.shape[1], odd.shape[1], even.stride(0), even.stride(1),
                          BM=32, BN=64)
        return out_t.t()
