"""Reference Triton solution for l1_topk: the row stays in registers; k rounds of (max, first argmax, knock out).

Supports rows up to 16384 elements (the performance case has 2048).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _topk_kernel(x_ptr, val_ptr, idx_ptr, n_cols, K, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32)
    # masked lanes can never be picked: give them an index past every real one
    cand = tl.where(mask, cols, BLOCK)
    for j in range(0, K):
        m = tl.max(x, axis=0)
        i = tl.min(tl.where((x == m) & (cand < BLOCK), cand, BLOCK), axis=0)
        tl.store(val_ptr + row * K + j, m.to(val_ptr.dtype.element_ty))
        tl.store(idx_ptr + row * K + j, i.to(tl.int64))
        hit = cols == i
        x = tl.where(hit, float("-inf"), x)
        cand = tl.where(hit, BLOCK, cand)


class ModelNew(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor):
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        rows = x2.shape[0]
        values = torch.empty((rows, self.k), dtype=x.dtype, device=x.device)
        indices = torch.empty((rows, self.k), dtype=torch.int64, device=x.device)
        BLOCK = triton.next_power_of_2(n_cols)
        assert BLOCK <= 16384, "rows longer than 16384 are not supported by this solution"
        _topk_kernel[(rows,)](x2, values, indices, n_cols, self.k, BLOCK=BLOCK, num_warps=8)
        shape = tuple(x.shape[:-1]) + (self.k,)
        return values.view(shape), indices.view(shape)
