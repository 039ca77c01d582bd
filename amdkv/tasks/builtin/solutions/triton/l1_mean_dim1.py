"""Reference Triton solution for l1_mean_dim1: each program owns a column strip and walks the reduced dim."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _mean_mid_kernel(x_ptr, out_ptr, R, C, stride_b, stride_r, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    cmask = cols < C
    acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        ptrs = x_ptr + b * stride_b + rows[:, None].to(tl.int64) * stride_r + cols[None, :]
        acc += tl.load(ptrs, mask=(rows[:, None] < R) & cmask[None, :], other=0.0).to(tl.float32)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + b * C + cols, (total / R).to(out_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, R, C = x.shape
        out = torch.empty((B, C), dtype=x.dtype, device=x.device)
        BLOCK_R, BLOCK_C = 16, 256
        grid = (triton.cdiv(C, BLOCK_C), B)
        _mean_mid_kernel[grid](x, out, R, C, x.stride(0), x.stride(1), BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C, num_warps=4)
        return out
