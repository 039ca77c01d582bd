"""Reference Triton solution for l1_groupnorm: one program per (sample, group); mean, variance, write."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _groupnorm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, C, HW, groups, eps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    n = pid // groups
    g = pid % groups
    cpg = C // groups
    size = cpg * HW
    base = n.to(tl.int64) * C * HW + g.to(tl.int64) * size
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + offs, mask=offs < size, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / size
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < size
        d = tl.where(m, tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / size + eps)
    for start in range(0, size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < size
        c = g * cpg + offs // HW
        w = tl.load(w_ptr + c, mask=m, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + c, mask=m, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + base + offs, mask=m, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, channels: int, groups: int, eps: float = 1e-5):
        super().__init__()
        self.groups = groups
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N, C = x.shape[0], x.shape[1]
        HW = x.numel() // (N * C)
        out = torch.empty_like(x)
        size = (C // self.groups) * HW
        BLOCK = min(2048, triton.next_power_of_2(size))
        _groupnorm_kernel[(N * self.groups,)](x, self.weight, self.bias, out, C, HW, self.groups, self.eps,
                                              BLOCK=BLOCK, num_warps=8)
        return out
