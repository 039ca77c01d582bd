"""Reference Triton solution for rocm_fused_add_rmsnorm: one program per row, fp32 statistics."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, res_out_ptr, H, eps,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * H
    # Pass 1: r = x + residual, store the new residual, accumulate sum of squares in fp32.
    sq = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        r = tl.load(x_ptr + base + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + base + cols, r.to(res_out_ptr.dtype.element_ty), mask=m)
        sq += r * r
    inv = 1.0 / tl.sqrt(tl.sum(sq, axis=0) / H + eps)
    # Pass 2: recompute r from the inputs (fp32, not the rounded residual) and normalise.
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        r = tl.load(x_ptr + base + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols, (r * inv * w).to(out_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int = 4096, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        x = x.contiguous()
        residual = residual.contiguous()
        h = x.shape[-1]
        rows = x.numel() // h
        out = torch.empty_like(x)
        res_out = torch.empty_like(x)
        block = min(triton.next_power_of_2(h), 4096)
        _add_rmsnorm_kernel[(rows,)](x, residual, self.weight, out, res_out, h, self.eps,
                                     BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out, res_out
