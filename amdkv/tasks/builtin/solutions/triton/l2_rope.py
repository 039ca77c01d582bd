"""Reference Triton solution for l2_rope: each program rotates a (positions x half-dim) tile of one head."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, S, HALF, BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    rs = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    rh = tl.arange(0, BLOCK_H)
    mask = (rs[:, None] < S) & (rh[None, :] < HALF)
    base = bh * S * 2 * HALF + rs[:, None].to(tl.int64) * (2 * HALF) + rh[None, :]
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF, mask=mask, other=0.0).to(tl.float32)
    cs_off = rs[:, None] * HALF + rh[None, :]
    c = tl.load(cos_ptr + cs_off, mask=mask, other=0.0)
    s = tl.load(sin_ptr + cs_off, mask=mask, other=0.0)
    tl.store(out_ptr + base, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + base + HALF, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, head_dim: int, max_seq: int, base: float = 10000.0):
        super().__init__()
        self.register_buffer("cos", torch.empty(max_seq, head_dim // 2))
        self.register_buffer("sin", torch.empty(max_seq, head_dim // 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, H, S, D = x.shape
        half = D // 2
        out = torch.empty_like(x)
        cos = self.cos.contiguous()
        sin = self.sin.contiguous()
        BLOCK_H = triton.next_power_of_2(half)
        BLOCK_S = max(1, 4096 // BLOCK_H)
        grid = (triton.cdiv(S, BLOCK_S), B * H)
        _rope_kernel[grid](x, cos, sin, out, S, half, BLOCK_S=BLOCK_S, BLOCK_H=BLOCK_H, num_warps=4)
        return out
