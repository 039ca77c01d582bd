"""Reference Triton solution for l1_max_lastdim: one program per row, running block maximum."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_max_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * stride_row
    acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(base + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        acc = tl.maximum(acc, v)
    tl.store(out_ptr + row, tl.max(acc, axis=0).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_cols = x.shape[-1]
        x2 = x.view(-1, n_cols)
        out = torch.empty(x.shape[:-1], dtype=x.dtype, device=x.device)
        BLOCK = min(4096, triton.next_power_of_2(n_cols))
        _row_max_kernel[(x2.shape[0],)](x2, out, n_cols, x2.stride(0), BLOCK=BLOCK, num_warps=8)
        return out
