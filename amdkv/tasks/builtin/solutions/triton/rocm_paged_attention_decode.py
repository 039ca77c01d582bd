"""Reference Triton solution for rocm_paged_attention_decode: one program per (sequence, kv head) serves every
query head of its GQA group with tl.dot; online softmax over token tiles gathered page by page."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _paged_decode_kernel(q_ptr, kc_ptr, vc_ptr, bt_ptr, ctx_ptr, o_ptr, scale,
                         GROUP, D, BLOCK_SIZE,
                         stride_qs, stride_qh,
                         stride_cb, stride_cs, stride_ch,
                         stride_bts, stride_os, stride_oh,
                         G_PAD: tl.constexpr, D_PAD: tl.constexpr, BLOCK_N: tl.constexpr):
    seq = tl.program_id(0)
    kvh = tl.program_id(1)
    ctx = tl.load(ctx_ptr + seq)
    g = tl.arange(0, G_PAD)
    d = tl.arange(0, D_PAD)
    gm = g < GROUP
    dm = d < D
    heads = kvh * GROUP + g
    q = tl.load(q_ptr + seq * stride_qs + heads[:, None] * stride_qh + d[None, :],
                mask=gm[:, None] & dm[None, :], other=0.0)
    m_i = tl.full((G_PAD,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((G_PAD,), dtype=tl.float32)
    acc = tl.zeros((G_PAD, D_PAD), dtype=tl.float32)
    n = tl.arange(0, BLOCK_N)
    for start in range(0, ctx, BLOCK_N):
        tok = start + n
        tm = tok < ctx
        page = tl.load(bt_ptr + seq * stride_bts + tok // BLOCK_SIZE, mask=tm, other=0).to(tl.int64)
        row = page * stride_cb + (tok % BLOCK_SIZE) * stride_cs + kvh * stride_ch
        kv_mask = tm[:, None] & dm[None, :]
        k = tl.load(kc_ptr + row[:, None] + d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(vc_ptr + row[:, None] + d[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale  # [G_PAD, BLOCK_N] fp32
        s = tl.where(tm[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + seq * stride_os + heads[:, None] * stride_oh + d[None, :],
             out.to(o_ptr.dtype.element_ty), mask=gm[:, None] & dm[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_heads: int = 32, num_kv_heads: int = 8, head_size: int = 128):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.scale = 1.0 / math.sqrt(head_size)

    def forward(self, query, key_cache, value_cache, block_tables, context_lens):
        query = query.contiguous()
        key_cache = key_cache.contiguous()
        value_cache = value_cache.contiguous()
        block_tables = block_tables.contiguous()
        context_lens = context_lens.contiguous()
        num_seqs = query.shape[0]
        block_size = key_cache.shape[1]
        group = self.num_heads // self.num_kv_heads
        out = torch.empty_like(query)
        block_n = max(64, triton.next_power_of_2(block_size))
        _paged_decode_kernel[(num_seqs, self.num_kv_heads)](
            query, key_cache, value_cache, block_tables, context_lens, out, self.scale,
            group, self.head_size, block_size,
            query.stride(0), query.stride(1),
            key_cache.stride(0), key_cache.stride(1), key_cache.stride(2),
            block_tables.stride(0), out.stride(0), out.stride(1),
            G_PAD=max(16, triton.next_power_of_2(group)), D_PAD=triton.next_power_of_2(self.head_size),
            BLOCK_N=block_n, num_warps=4)
        return out
