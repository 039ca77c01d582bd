"""Reference Triton solution for rocm_tp_partials_residual_rmsnorm: one program per row sums the TP partials
and the residual in fp32 (fixed rank order), stores the new residual, then normalises."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _row_sum(p_ptr, res_ptr, base, cols, m, TP, stride_p):
    s = tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
    for r in range(0, TP):
        s += tl.load(p_ptr + r * stride_p + base + cols, mask=m, other=0.0).to(tl.float32)
    return s


@triton.jit
def _tp_reduce_rmsnorm_kernel(p_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, TP, H, stride_p, eps,
                              BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * H
    sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        s = _row_sum(p_ptr, res_ptr, base, cols, m, TP, stride_p)
        tl.store(res_out_ptr + base + cols, s.to(res_out_ptr.dtype.element_ty), mask=m)
        sq += s * s
    inv = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / H + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        s = _row_sum(p_ptr, res_ptr, base, cols, m, TP, stride_p)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols, (s * inv * w).to(out_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int = 8192, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, partials: torch.Tensor, residual: torch.Tensor):
        partials = partials.contiguous()
        residual = residual.contiguous()
        tp, t, h = partials.shape
        out = torch.empty_like(residual)
        res_out = torch.empty_like(residual)
        block = min(triton.next_power_of_2(h), 2048)
        _tp_reduce_rmsnorm_kernel[(t,)](partials, residual, self.weight, out, res_out, tp, h,
                                        partials.stride(0), self.eps, BLOCK=block,
                                        num_warps=8 if block >= 2048 else 4)
        return out, res_out
