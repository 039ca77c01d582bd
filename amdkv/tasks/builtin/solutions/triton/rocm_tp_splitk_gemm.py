"""Reference Triton solution for rocm_tp_splitk_gemm: split-K GEMM with one K split per TP shard, each program
writing an fp32 partial tile to a workspace; a second kernel sums the partials in shard order (deterministic,
no atomics) and casts to fp16."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _splitk_partial_kernel(x_ptr, w_ptr, ws_ptr, M, N, K_SHARD, stride_xm, stride_wn, stride_ws,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    split = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mm = rm < M
    nm = rn < N
    k_lo = split * K_SHARD
    x_ptrs = x_ptr + rm[:, None] * stride_xm + (k_lo + rk)[None, :]
    w_ptrs = w_ptr + rn.to(tl.int64)[None, :] * stride_wn + (k_lo + rk)[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K_SHARD, BLOCK_K):
        km = (k0 + rk) < K_SHARD
        a = tl.load(x_ptrs, mask=mm[:, None] & km[None, :], other=0.0)
        b = tl.load(w_ptrs, mask=nm[None, :] & km[:, None], other=0.0)
        acc += tl.dot(a, b)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    tl.store(ws_ptr + split * stride_ws + rm[:, None] * N + rn[None, :], acc, mask=mm[:, None] & nm[None, :])


@triton.jit
def _splitk_reduce_kernel(ws_ptr, y_ptr, MN, SPLITS, stride_ws, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, SPLITS):
        acc += tl.load(ws_ptr + s * stride_ws + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 14336, out_features: int = 4096, tp_size: int = 8):
        super().__init__()
        self.tp_size = tp_size
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.weight
        m, k = x.shape
        n = w.shape[0]
        splits = self.tp_size
        k_shard = k // splits  # the task's shards are equal (K divisible by tp_size)
        bm = 16 if m <= 16 else (32 if m <= 32 else 64)
        bn, bk = 64, 128
        ws = torch.empty((splits, m, n), dtype=torch.float32, device=x.device)
        _splitk_partial_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn), splits)](
            x, w, ws, m, n, k_shard, x.stride(0), w.stride(0), ws.stride(0),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4)
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        block = 1024
        _splitk_reduce_kernel[(triton.cdiv(m * n, block),)](ws, y, m * n, splits, ws.stride(0), BLOCK=block,
                                                             num_warps=4)
        return y
