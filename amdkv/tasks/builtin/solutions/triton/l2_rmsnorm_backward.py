"""Reference Triton solution for l2_rmsnorm_backward: one program per row, both row reductions in registers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rms_bwd_kernel(x_ptr, dy_ptr, w_ptr, dx_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    off = row * N + cols
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + off, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    g = dy * w
    c = tl.sum(g * x, axis=0) / N
    dx = rstd * g - rstd * rstd * rstd * x * c
    tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
        N = x.shape[-1]
        x2 = x.contiguous().view(-1, N)
        dy2 = grad_out.contiguous().view(-1, N)
        dx = torch.empty_like(x2)
        BLOCK = triton.next_power_of_2(N)
        num_warps = 4 if BLOCK <= 1024 else (8 if BLOCK <= 4096 else 16)
        _rms_bwd_kernel[(x2.shape[0],)](x2, dy2, self.weight, dx, N, self.eps, BLOCK=BLOCK, num_warps=num_warps)
        return dx.view(x.shape)
