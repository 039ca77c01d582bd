"""Reference Triton solution for l3_moe_layer: fused router, per-expert token grouping, grouped SwiGLU GEMMs over gathered rows, weighted combine (no atomics)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _router_kernel(x_ptr, w_ptr, wt_ptr, idx_ptr, T, H, E, K,
                   BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    rt = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    re = tl.arange(0, BLOCK_E)
    rk = tl.arange(0, BLOCK_K)
    tmask = rt < T
    emask = re < E
    acc = tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        a = tl.load(x_ptr + rt[:, None].to(tl.int64) * H + k0 + rk[None, :],
                    mask=tmask[:, None] & (k0 + rk[None, :] < H), other=0.0)
        w = tl.load(w_ptr + re[None, :] * H + k0 + rk[:, None], mask=emask[None, :] & (k0 + rk[:, None] < H), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    logits = tl.where(emask[None, :], acc, float("-inf"))
    m = tl.max(logits, axis=1)
    p = tl.exp(logits - m[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    cand0 = tl.where(emask[None, :], re[None, :], BLOCK_E) + tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.int32)
    total = tl.zeros([BLOCK_T], dtype=tl.float32)
    for rep in tl.static_range(2):  # pass 0: total of the winners; pass 1: write renormalised weights
        work = p
        cand = cand0
        for j in range(0, K):
            best = tl.max(work, axis=1)
            bi = tl.min(tl.where((work == best[:, None]) & (cand < BLOCK_E), cand, BLOCK_E), axis=1)
            if rep == 0:
                total += best
            else:
                tl.store(idx_ptr + rt.to(tl.int64) * K + j, bi, mask=tmask)
                tl.store(wt_ptr + rt.to(tl.int64) * K + j, best / total, mask=tmask)
            hit = re[None, :] == bi[:, None]
            work = tl.where(hit, -1.0, work)
            cand = tl.where(hit, BLOCK_E, cand)


@triton.jit
def _group_by_expert_kernel(idx_ptr, sorted_tok_ptr, slot_ptr, count_ptr, offset_ptr, n_assign, K,
                            BLOCK: tl.constexpr):
    # program e: its rows start after every assignment to a smaller expert id; order within is by token
    e = tl.program_id(0)
    offset = tl.sum(tl.zeros([BLOCK], dtype=tl.int32), axis=0)
    for start in range(0, n_assign, BLOCK):
        a = start + tl.arange(0, BLOCK)
        ex = tl.load(idx_ptr + a, mask=a < n_assign, other=2147483647)
        offset += tl.sum((ex < e).to(tl.int32), axis=0)
    running = offset
    for start in range(0, n_assign, BLOCK):
        a = start + tl.arange(0, BLOCK)
        am = a < n_assign
        ex = tl.load(idx_ptr + a, mask=am, other=-1)
        hit = (ex == e) & am
        hi = hit.to(tl.int32)
        pos = running + tl.cumsum(hi, axis=0) - 1
        tl.store(sorted_tok_ptr + pos, a // K, mask=hit)
        tl.store(slot_ptr + a, pos, mask=hit)
        running += tl.sum(hi, axis=0)
    tl.store(count_ptr + e, running - offset)
    tl.store(offset_ptr + e, offset)


@triton.jit
def _expert_gemm_kernel(a_ptr, rows_ptr, w_ptr, w2_ptr, out_ptr, count_ptr, offset_ptr, N, K,
                        GATHER: tl.constexpr, SWIGLU: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # out[off + r, n] = A_row(r) @ W_e[n, :]^T (SWIGLU: silu(A W_e^T) * (A W2_e^T)); A_row gathered by token id
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.program_id(2)
    cnt = tl.load(count_ptr + e)
    off = tl.load(offset_ptr + e)
    if pid_m * BLOCK_M < cnt:
        r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rmask = r < cnt
        if GATHER:
            src = tl.load(rows_ptr + off + r, mask=rmask, other=0).to(tl.int64)
        else:
            src = (off + r).to(tl.int64)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        w_base = e.to(tl.int64) * N * K
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc2 = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + src[:, None] * K + k0 + rk[None, :],
                        mask=rmask[:, None] & (k0 + rk[None, :] < K), other=0.0)
            wmask = (k0 + rk[:, None] < K) & (rn[None, :] < N)
            w_off = w_base + rn[None, :].to(tl.int64) * K + k0 + rk[:, None]
            acc = tl.dot(a, tl.load(w_ptr + w_off, mask=wmask, other=0.0), acc, input_precision="ieee")
            if SWIGLU:
                acc2 = tl.dot(a, tl.load(w2_ptr + w_off, mask=wmask, other=0.0), acc2, input_precision="ieee")
        if SWIGLU:
            acc = acc / (1.0 + tl.exp(-acc)) * acc2
        dst = (off + r).to(tl.int64)
        tl.store(out_ptr + dst[:, None] * N + rn[None, :], acc, mask=rmask[:, None] & (rn[None, :] < N))


@triton.jit
def _combine_kernel(y_ptr, slot_ptr, wt_ptr, out_ptr, H, K, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(0, K):
        s = tl.load(slot_ptr + t * K + j).to(tl.int64)
        w = tl.load(wt_ptr + t * K + j)
        acc += w * tl.load(y_ptr + s * H + cols, mask=cmask, other=0.0)
    tl.store(out_ptr + t * H + cols, acc.to(out_ptr.dtype.element_ty), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, intermediate: int, n_experts: int, k: int):
        super().__init__()
        self.k = k
        self.n_experts = n_experts
        self.gate = nn.Linear(hidden, n_experts, bias=False)
        self.w_gate = nn.Parameter(torch.empty(n_experts, intermediate, hidden))
        self.w_up = nn.Parameter(torch.empty(n_experts, intermediate, hidden))
        self.w_down = nn.Parameter(torch.empty(n_experts, hidden, intermediate))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous()
        T, H = x2.shape
        E, K = self.n_experts, self.k
        Fi = self.w_gate.shape[1]
        weights = torch.empty((T, K), dtype=torch.float32, device=x.device)
        experts = torch.empty((T, K), dtype=torch.int32, device=x.device)
        BLOCK_E = max(16, triton.next_power_of_2(E))
        _router_kernel[(triton.cdiv(T, 32),)](x2, self.gate.weight.contiguous(), weights, experts, T, H, E, K,
                                              BLOCK_T=32, BLOCK_E=BLOCK_E, BLOCK_K=64, num_warps=4)
        n_assign = T * K
        sorted_tok = torch.empty(n_assign, dtype=torch.int32, device=x.device)
        slot = torch.empty(n_assign, dtype=torch.int32, device=x.device)
        counts = torch.empty(E, dtype=torch.int32, device=x.device)
        offsets = torch.empty(E, dtype=torch.int32, device=x.device)
        _group_by_expert_kernel[(E,)](experts, sorted_tok, slot, counts, offsets, n_assign, K, BLOCK=1024, num_warps=4)
        BM, BN, BK = 64, 64, 32
        act = torch.empty((n_assign, Fi), dtype=torch.float32, device=x.device)
        _expert_gemm_kernel[(triton.cdiv(T, BM), triton.cdiv(Fi, BN), E)](
            x2, sorted_tok, self.w_gate.contiguous(), self.w_up.contiguous(), act, counts, offsets, Fi, H,
            GATHER=True, SWIGLU=True, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4)
        y = torch.empty((n_assign, H), dtype=torch.float32, device=x.device)
        w_down = self.w_down.contiguous()
        _expert_gemm_kernel[(triton.cdiv(T, BM), triton.cdiv(H, BN), E)](
            act, sorted_tok, w_down, w_down, y, counts, offsets, H, Fi,
            GATHER=False, SWIGLU=False, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_warps=4)
        out = torch.empty_like(x2)
        BLOCK = min(1024, triton.next_power_of_2(H))
        _combine_kernel[(T, triton.cdiv(H, BLOCK))](y, slot, weights, out, H, K, BLOCK=BLOCK, num_warps=4)
        return out
