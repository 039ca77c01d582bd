"""Reference Triton solution for l1_argmax: per-lane running (max, first index), reduced at the end."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _argmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n_cols
    best = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    best_i = tl.full([BLOCK], 2147483647, dtype=tl.int32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        v = tl.load(xr + cols, mask=mask, other=float("-inf")).to(tl.float32)
        # strict '>' keeps the earliest index per lane; masked lanes never win
        take = (v > best) & mask
        best = tl.where(take, v, best)
        best_i = tl.where(take, cols, best_i)
    m = tl.max(best, axis=0)
    idx = tl.min(tl.where(best == m, best_i, 2147483647), axis=0)
    tl.store(out_ptr + row, idx.to(tl.int64))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty(x.shape[:-1], dtype=torch.int64, device=x.device)
        BLOCK = min(4096, triton.next_power_of_2(n_cols))
        _argmax_kernel[(x2.shape[0],)](x2, out, n_cols, BLOCK=BLOCK, num_warps=8)
        return out
