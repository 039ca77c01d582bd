"""Reference Triton solution for rocm_topk_mask_softmax: one program per row. The k-th largest scaled logit is
found exactly by a 32-step bisection over the order-preserving integer image of the fp32 values (each step
counts the entries at or above the midpoint); then a masked softmax over the entries >= that value."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _ordered_key(s):
    """fp32 -> int64 key with the same order (s must not be -0.0: callers add +0.0 first)."""
    bits = s.to(tl.int32, bitcast=True)
    return tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64)


@triton.jit
def _topk_softmax_kernel(x_ptr, t_ptr, k_ptr, o_ptr, V, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    temp = tl.load(t_ptr + row)
    kk = tl.load(k_ptr + row)
    xrow = x_ptr + row * stride_x
    # Bisection invariant: count(key >= lo) >= k; it ends at the largest such lo, the k-th largest key.
    lo = tl.full([], -2147483648, tl.int64)
    hi = tl.full([], 2147483647, tl.int64)
    for _ in range(32):
        mid = (lo + hi + 1) >> 1
        cnt = tl.zeros((BLOCK,), dtype=tl.int32)
        for start in range(0, V, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = cols < V
            s = tl.load(xrow + cols, mask=m, other=0.0) / temp + 0.0
            cnt += ((_ordered_key(s) >= mid) & m).to(tl.int32)
        ok = tl.sum(cnt, axis=0) >= kk
        lo = tl.where(ok, mid, lo)
        hi = tl.where(ok, hi, mid - 1)
    kth_bits = tl.where(lo >= 0, lo, lo ^ 0x7FFFFFFF).to(tl.int32)
    kth = kth_bits.to(tl.float32, bitcast=True)
    # Row max (always kept) and the sum over kept entries.
    mx = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        s = tl.load(xrow + cols, mask=cols < V, other=float("-inf")) / temp
        mx = tl.maximum(mx, s)
    row_max = tl.max(mx, axis=0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < V
        s = tl.load(xrow + cols, mask=m, other=0.0) / temp
        acc += tl.where(m & (s >= kth), tl.exp(s - row_max), 0.0)
    inv = 1.0 / tl.sum(acc, axis=0)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = cols < V
        s = tl.load(xrow + cols, mask=m, other=0.0) / temp
        p = tl.where(s >= kth, tl.exp(s - row_max) * inv, 0.0)
        tl.store(o_ptr + row * stride_o + cols, p, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, temperature, top_k):
        logits = logits.contiguous()
        temperature = temperature.contiguous()
        top_k = top_k.contiguous()
        b, v = logits.shape
        out = torch.empty((b, v), dtype=torch.float32, device=logits.device)
        block = min(triton.next_power_of_2(v), 2048)
        _topk_softmax_kernel[(b,)](logits, temperature, top_k, out, v, logits.stride(0), out.stride(0),
                                   BLOCK=block, num_warps=8)
        return out
