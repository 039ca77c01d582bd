"""Reference Triton solution for l2_int8_quant_rowwise: row absmax, IEEE division (div_rn) and round-half-even, so the codes match bit for bit."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _quant_rowwise_kernel(x_ptr, q_ptr, s_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=0)
    scale = tl.math.div_rn(amax, 127.0)
    y = tl.math.div_rn(x, tl.zeros_like(x) + scale)
    # round half to even without libdevice: floor(y + 0.5), stepping back on exact odd ties
    r = tl.floor(y + 0.5)
    tie = (r - y) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    r = tl.where(tie & odd, r - 1.0, r)
    r = tl.minimum(tl.maximum(r, -127.0), 127.0)
    tl.store(q_ptr + row * N + cols, r.to(tl.int8), mask=mask)
    tl.store(s_ptr + row, scale)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        N = x.shape[-1]
        x2 = x.contiguous().view(-1, N)
        q = torch.empty(x2.shape, dtype=torch.int8, device=x.device)
        s = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
        BLOCK = triton.next_power_of_2(N)
        num_warps = 4 if BLOCK <= 1024 else (8 if BLOCK <= 4096 else 16)
        _quant_rowwise_kernel[(x2.shape[0],)](x2, q, s, N, BLOCK=BLOCK, num_warps=num_warps)
        return q.view(x.shape), s.view(x.shape[:-1])
