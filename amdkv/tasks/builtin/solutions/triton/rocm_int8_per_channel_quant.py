"""Reference Triton solution for rocm_int8_per_channel_quant: one program per output channel (row): amax pass,
then quantise with an explicit round-half-to-even on the truncated integer (no libdevice rint needed)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _int8_rowquant_kernel(w_ptr, q_ptr, s_ptr, K, stride_w, stride_q, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, K, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        w = tl.load(w_ptr + row * stride_w + cols, mask=cols < K, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(w))
    scale = tl.maximum(tl.max(amax, axis=0), 1e-8) / 127.0
    tl.store(s_ptr + row, scale)
    for start in range(0, K, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < K
        v = tl.load(w_ptr + row * stride_w + cols, mask=m, other=0.0).to(tl.float32) / scale
        t = v.to(tl.int32)                       # truncates toward zero
        frac = tl.abs(v - t.to(tl.float32))      # exact
        away = (frac > 0.5) | ((frac == 0.5) & ((t & 1) != 0))
        r = tl.where(away, tl.where(v < 0, t - 1, t + 1), t)
        r = tl.minimum(tl.maximum(r, -128), 127)
        tl.store(q_ptr + row * stride_q + cols, r.to(tl.int8), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, w: torch.Tensor):
        w = w.contiguous()
        n, k = w.shape
        q = torch.empty((n, k), dtype=torch.int8, device=w.device)
        scale = torch.empty((n, 1), dtype=torch.float32, device=w.device)
        block = min(triton.next_power_of_2(k), 4096)
        _int8_rowquant_kernel[(n,)](w, q, scale, k, w.stride(0), q.stride(0), BLOCK=block,
                                    num_warps=8 if block >= 2048 else 4)
        return q, scale
