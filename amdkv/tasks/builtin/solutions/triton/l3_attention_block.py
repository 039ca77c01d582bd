"""Reference Triton solution for l3_attention_block: QKV GEMM, flash attention reading heads straight out of the packed QKV buffer, output GEMM with bias."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_kernel(a_ptr, w_ptr, bias_ptr, res_ptr, c_ptr, M, N, K, stride_am, stride_wn, stride_cm,
                   HAS_BIAS: tl.constexpr, ACT: tl.constexpr, HAS_RES: tl.constexpr, IEEE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # C = act(A @ W^T + bias) + res; A: (M, K) rows, W: (N, K) rows (nn.Linear layout), fp32 accumulation
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :]
    w_ptrs = w_ptr + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0.0)
        if IEEE:
            acc = tl.dot(a, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACT == 1:  # exact (erf) GELU
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    elif ACT == 2:  # ReLU
        acc = tl.maximum(acc, 0.0)
    cmask = (rm[:, None] < M) & (rn[None, :] < N)
    c_off = rm[:, None].to(tl.int64) * stride_cm + rn[None, :]
    if HAS_RES:
        acc += tl.load(res_ptr + c_off, mask=cmask, other=0.0).to(tl.float32)
    tl.store(c_ptr + c_off, acc.to(c_ptr.dtype.element_ty), mask=cmask)


def _linear(x2, w, bias=None, act=0, res=None):
    """x2: (M, K) with unit column stride; w: (N, K) contiguous; returns a fresh (M, N) tensor."""
    M, K = x2.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=x2.dtype, device=x2.device)
    if x2.dtype == torch.float32:
        cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, IEEE=True, num_warps=4)
    else:
        cfg = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, IEEE=False, num_warps=8)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _linear_kernel[grid](x2, w, bias if bias is not None else w, res if res is not None else out, out,
                         M, N, K, x2.stride(0), w.stride(0), out.stride(0),
                         HAS_BIAS=bias is not None, ACT=act, HAS_RES=res is not None, **cfg)
    return out


@triton.jit
def _causal_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, H, KV_GROUP, sm_scale,
                        sq_b, sq_h, sq_s, sk_b, sk_h, sk_s, sv_b, sv_h, sv_s, so_b, so_h, so_s,
                        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IEEE: tl.constexpr):
    # flash-attention forward, causal; grid = (query blocks, batch * heads); head dim has unit stride
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = bh % H
    hk = (h // KV_GROUP).to(tl.int64)  # grouped-query attention: KV_GROUP query heads share one kv head
    h = h.to(tl.int64)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + b * sq_b + h * sq_h + rm[:, None].to(tl.int64) * sq_s + rd[None, :],
                mask=rm[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # work in base 2
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    for start_n in range(0, hi, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + b * sk_b + hk * sk_h + rn[None, :].to(tl.int64) * sk_s + rd[:, None],
                     mask=rn[None, :] < S, other=0.0)
        if IEEE:
            s = tl.dot(q, kt, input_precision="ieee")
        else:
            s = tl.dot(q, kt)
        s = s * qk_scale
        keep = (rn[None, :] <= rm[:, None]) & (rn[None, :] < S)
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + b * sv_b + hk * sv_h + rn[:, None].to(tl.int64) * sv_s + rd[None, :],
                    mask=rn[:, None] < S, other=0.0)
        acc = acc * alpha[:, None]
        if IEEE:
            acc = tl.dot(p, v, acc, input_precision="ieee")
        else:
            acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    # every valid query row sees at least its own key, so l_i > 0 there; padded rows are masked on store
    l_safe = tl.where(rm < S, l_i, 1.0)
    out = acc / l_safe[:, None]
    tl.store(o_ptr + b * so_b + h * so_h + rm[:, None].to(tl.int64) * so_s + rd[None, :],
             out.to(o_ptr.dtype.element_ty), mask=rm[:, None] < S)


def _attention(q, k, v, out, B, H, S, D, kv_group, sq, sk, sv, so):
    """q/k/v/out: base tensors; sq..so: (batch, head, seq) strides in elements; head dim contiguous."""
    assert D >= 16 and D & (D - 1) == 0, "head_dim must be a power of two >= 16"
    ieee = q.dtype == torch.float32
    BLOCK_M, BLOCK_N = (64, 32) if ieee else (64, 64)
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    _causal_attn_kernel[grid](q, k, v, out, S, H, kv_group, 1.0 / (D ** 0.5), *sq, *sk, *sv, *so,
                              HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, IEEE=ieee, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self, hidden: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False, dtype=torch.float16)
        self.proj = nn.Linear(hidden, hidden, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, Hd = x.shape
        nh = self.n_heads
        hd = Hd // nh
        x2 = x.contiguous().view(B * S, Hd)
        qkv = _linear(x2, self.qkv.weight.contiguous())  # (B*S, 3*Hd): [q heads | k heads | v heads]
        attn = torch.empty((B * S, Hd), dtype=x.dtype, device=x.device)
        s_in = (S * 3 * Hd, hd, 3 * Hd)
        s_out = (S * Hd, hd, Hd)
        _attention(qkv[:, 0:Hd], qkv[:, Hd:2 * Hd], qkv[:, 2 * Hd:], attn, B, nh, S, hd, 1, s_in, s_in, s_in, s_out)
        y = _linear(attn, self.proj.weight.contiguous(), self.proj.bias)
        return y.view(B, S, Hd)
