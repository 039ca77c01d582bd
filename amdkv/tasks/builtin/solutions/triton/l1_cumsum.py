"""Reference Triton solution for l1_cumsum: per row, block scans chained by a running carry (fp64 accumulation,
so long rows keep the accuracy of a double-accumulating reference; the kernel stays memory-bound)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * n_cols
    orow = out_ptr + row * n_cols
    carry = tl.zeros([1], dtype=tl.float64)
    carry = tl.sum(carry, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(xr + cols, mask=mask, other=0.0).to(tl.float64)
        c = tl.cumsum(x, axis=0) + carry
        tl.store(orow + cols, c.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        out = torch.empty_like(x2)
        BLOCK = min(1024, triton.next_power_of_2(n_cols))
        _cumsum_kernel[(x2.shape[0],)](x2, out, n_cols, BLOCK=BLOCK, num_warps=4)
        return out.view(x.shape)
