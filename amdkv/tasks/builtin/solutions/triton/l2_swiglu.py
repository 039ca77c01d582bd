"""Reference Triton solution for l2_swiglu: 2-D tiles over (row, column of the half), fp32 math."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _swiglu_kernel(x_ptr, out_ptr, R, F_, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr):
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rf = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    mask = (rr[:, None] < R) & (rf[None, :] < F_)
    in_off = rr[:, None].to(tl.int64) * (2 * F_) + rf[None, :]
    a = tl.load(x_ptr + in_off, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + in_off + F_, mask=mask, other=0.0).to(tl.float32)
    y = a / (1.0 + tl.exp(-a)) * b
    tl.store(out_ptr + rr[:, None].to(tl.int64) * F_ + rf[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F_ = x.shape[-1] // 2
        x2 = x.contiguous().view(-1, 2 * F_)
        R = x2.shape[0]
        out = torch.empty((R, F_), dtype=x.dtype, device=x.device)
        BLOCK_R, BLOCK_F = 8, 512
        _swiglu_kernel[(triton.cdiv(R, BLOCK_R), triton.cdiv(F_, BLOCK_F))](x2, out, R, F_, BLOCK_R=BLOCK_R,
                                                                           BLOCK_F=BLOCK_F, num_warps=4)
        return out.view(tuple(x.shape[:-1]) + (F_,))
