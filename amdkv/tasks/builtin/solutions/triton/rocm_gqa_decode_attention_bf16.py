"""Reference Triton solution for rocm_gqa_decode_attention_bf16: split-KV (flash-decoding). Kernel 1: one
program per (batch, kv head, KV split) computes unnormalised partial outputs for the whole GQA group with
tl.dot; kernel 2 merges the splits with their running max and sum. fp32 accumulation throughout."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _decode_split_kernel(q_ptr, k_ptr, v_ptr, len_ptr, acc_ptr, ml_ptr, scale,
                         GROUP, D, SPLIT_LEN, NUM_SPLITS,
                         stride_qb, stride_qh, stride_kb, stride_kl, stride_kh,
                         G_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    sp = tl.program_id(2)
    seq_len = tl.load(len_ptr + b)
    lo = sp * SPLIT_LEN
    hi = tl.minimum(lo + SPLIT_LEN, seq_len)
    g = tl.arange(0, G_PAD)
    d = tl.arange(0, D_PAD)
    gm = g < GROUP
    dm = d < D
    heads = kvh * GROUP + g
    q = tl.load(q_ptr + b * stride_qb + heads[:, None] * stride_qh + d[None, :],
                mask=gm[:, None] & dm[None, :], other=0.0)
    m_i = tl.full((G_PAD,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((G_PAD,), dtype=tl.float32)
    acc = tl.zeros((G_PAD, D_PAD), dtype=tl.float32)
    n = tl.arange(0, BLOCK_N)
    base = k_ptr + b.to(tl.int64) * stride_kb + kvh * stride_kh
    vbase = v_ptr + b.to(tl.int64) * stride_kb + kvh * stride_kh
    for start in range(lo, hi, BLOCK_N):
        tok = start + n
        tm = tok < hi
        offs = tok.to(tl.int64)[:, None] * stride_kl + d[None, :]
        k = tl.load(base + offs, mask=tm[:, None] & dm[None, :], other=0.0)
        v = tl.load(vbase + offs, mask=tm[:, None] & dm[None, :], other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(tm[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    # Layout of the partials: acc [B, H, NUM_SPLITS, D_PAD], ml [B, H, NUM_SPLITS, 2] (max, sum).
    h_all = tl.num_programs(1) * GROUP
    row = (b * h_all + heads) * NUM_SPLITS + sp
    tl.store(acc_ptr + row[:, None] * D_PAD + d[None, :], acc, mask=gm[:, None])
    tl.store(ml_ptr + row * 2, m_i, mask=gm)
    tl.store(ml_ptr + row * 2 + 1, l_i, mask=gm)


@triton.jit
def _decode_merge_kernel(acc_ptr, ml_ptr, o_ptr, D, NUM_SPLITS, stride_ob, stride_oh,
                         S_PAD: tl.constexpr, D_PAD: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.arange(0, S_PAD)
    d = tl.arange(0, D_PAD)
    sm = s < NUM_SPLITS
    row = (b * tl.num_programs(1) + h) * NUM_SPLITS + s
    m = tl.load(ml_ptr + row * 2, mask=sm, other=float("-inf"))
    l = tl.load(ml_ptr + row * 2 + 1, mask=sm, other=0.0)
    m_max = tl.max(m, axis=0)  # split 0 is never empty, so this is finite
    w = tl.where(sm, tl.exp(m - m_max), 0.0)
    acc = tl.load(acc_ptr + row[:, None] * D_PAD + d[None, :], mask=sm[:, None], other=0.0)
    out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l * w, axis=0)
    tl.store(o_ptr + b * stride_ob + h * stride_oh + d, out.to(o_ptr.dtype.element_ty), mask=d < D)


class ModelNew(nn.Module):
    def __init__(self, num_heads: int = 32, num_kv_heads: int = 8, head_size: int = 128):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.group = num_heads // num_kv_heads
        self.scale = 1.0 / math.sqrt(head_size)

    def forward(self, q, k_cache, v_cache, seq_lens):
        q = q.contiguous()
        k_cache = k_cache.contiguous()
        v_cache = v_cache.contiguous()
        seq_lens = seq_lens.contiguous()
        bsz, l_max = k_cache.shape[0], k_cache.shape[1]
        d_pad = triton.next_power_of_2(self.head_size)
        block_n = 64
        # Enough (batch, kv head, split) programs to fill the GPU; splits are whole multiples of BLOCK_N.
        target_splits = max(1, 512 // (bsz * self.num_kv_heads))
        split_len = max(block_n, triton.next_power_of_2(triton.cdiv(l_max, target_splits)))
        num_splits = triton.cdiv(l_max, split_len)
        acc = torch.empty((bsz, self.num_heads, num_splits, d_pad), dtype=torch.float32, device=q.device)
        ml = torch.empty((bsz, self.num_heads, num_splits, 2), dtype=torch.float32, device=q.device)
        _decode_split_kernel[(bsz, self.num_kv_heads, num_splits)](
            q, k_cache, v_cache, seq_lens, acc, ml, self.scale,
            self.group, self.head_size, split_len, num_splits,
            q.stride(0), q.stride(1), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            G_PAD=max(16, triton.next_power_of_2(self.group)), D_PAD=d_pad, BLOCK_N=block_n, num_warps=4)
        out = torch.empty_like(q)
        _decode_merge_kernel[(bsz, self.num_heads)](
            acc, ml, out, self.head_size, num_splits, out.stride(0), out.stride(1),
            S_PAD=triton.next_power_of_2(num_splits), D_PAD=d_pad, num_warps=4)
        return out
