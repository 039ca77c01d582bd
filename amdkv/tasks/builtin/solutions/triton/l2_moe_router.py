"""Reference Triton solution for l2_moe_router: a token tile's logits via tl.dot, softmax and top-k in registers, one kernel."""

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
        w = tl.load(w_ptr + re[None, :] * H + k0 + rk[:, None],
                    mask=emask[None, :] & (k0 + rk[:, None] < H), other=0.0)
        acc = tl.dot(a, w, acc, input_precision="ieee")
    logits = tl.where(emask[None, :], acc, float("-inf"))
    m = tl.max(logits, axis=1)
    p = tl.exp(logits - m[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    cand0 = tl.where(emask[None, :], re[None, :], BLOCK_E) + tl.zeros([BLOCK_T, BLOCK_E], dtype=tl.int32)
    # pass 0 finds the total probability of the k winners; pass 1 repeats the selection and writes p / total
    total = tl.zeros([BLOCK_T], dtype=tl.float32)
    for rep in tl.static_range(2):
        work = p
        cand = cand0
        for j in range(0, K):
            best = tl.max(work, axis=1)
            bi = tl.min(tl.where((work == best[:, None]) & (cand < BLOCK_E), cand, BLOCK_E), axis=1)
            if rep == 0:
                total += best
            else:
                tl.store(idx_ptr + rt.to(tl.int64) * K + j, bi.to(tl.int64), mask=tmask)
                tl.store(wt_ptr + rt.to(tl.int64) * K + j, (best / total).to(wt_ptr.dtype.element_ty), mask=tmask)
            hit = re[None, :] == bi[:, None]
            work = tl.where(hit, -1.0, work)
            cand = tl.where(hit, BLOCK_E, cand)

class ModelNew(nn.Module):
    def __init__(self, hidden: int, n_experts: int, k: int):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(hidden, n_experts, bias=False)

    def forward(self, x: torch.Tensor):
        H = x.shape[-1]
        x2 = x.contiguous().view(-1, H)
        T = x2.shape[0]
        w = self.gate.weight.contiguous()
        E = w.shape[0]
        weights = torch.empty((T, self.k), dtype=x.dtype, device=x.device)
        experts = torch.empty((T, self.k), dtype=torch.int64, device=x.device)
        BLOCK_T = 32
        BLOCK_E = max(16, triton.next_power_of_2(E))
        _router_kernel[(triton.cdiv(T, BLOCK_T),)](x2, w, weights, experts, T, H, E, self.k,
                                                   BLOCK_T=BLOCK_T, BLOCK_E=BLOCK_E, BLOCK_K=64, num_warps=4)
        shape = tuple(x.shape[:-1]) + (self.k,)
        return weights.view(shape), experts.view(shape)
