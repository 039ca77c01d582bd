"""Reference Triton solution for rocm_fused_add_layernorm: one program per row; pass 1 adds and stores the
residual and accumulates the mean, pass 2 the centred variance, pass 3 normalises (all fp32)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _add_layernorm_kernel(x_ptr, res_ptr, w_ptr, b_ptr, out_ptr, res_out_ptr, H, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * H
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        r = tl.load(x_ptr + base + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(res_out_ptr + base + cols, r.to(res_out_ptr.dtype.element_ty), mask=m)
        acc += r
    mean = tl.sum(acc, axis=0) / H
    acc2 = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        r = tl.load(x_ptr + base + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
        c = tl.where(m, r - mean, 0.0)
        acc2 += c * c
    rstd = 1.0 / tl.sqrt(tl.sum(acc2, axis=0) / H + eps)
    for start in range(0, H, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < H
        r = tl.load(x_ptr + base + cols, mask=m, other=0.0).to(tl.float32) + \
            tl.load(res_ptr + base + cols, mask=m, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=m, other=0.0).to(tl.float32)
        tl.store(out_ptr + base + cols, ((r - mean) * rstd * w + b).to(out_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int = 4096, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        x = x.contiguous()
        residual = residual.contiguous()
        h = x.shape[-1]
        rows = x.numel() // h
        out = torch.empty_like(x)
        res_out = torch.empty_like(x)
        block = min(triton.next_power_of_2(h), 4096)
        _add_layernorm_kernel[(rows,)](x, residual, self.weight, self.bias, out, res_out, h, self.eps,
                                       BLOCK=block, num_warps=8 if block >= 2048 else 4)
        return out, res_out
