"""Reference Triton solution for rocm_gemm_llama3_70b_oproj_bf16: tiled bf16 GEMM, fp32 accumulation, M-dependent tiles."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_kernel(x_ptr, w_ptr, y_ptr, M, N, K,
                   stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped launch order: GROUP_M row-tiles share each column of W tiles while it is hot in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows_in_group
    pid_n = (pid % per_group) // rows_in_group

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    w_ptrs = w_ptr + rn[None, :] * stride_wn + rk[:, None] * stride_wk  # a [BLOCK_K, BLOCK_N] view of W^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kmask = (k0 + rk) < K
        x = tl.load(x_ptrs, mask=(rm[:, None] < M) & kmask[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=(rn[None, :] < N) & kmask[:, None], other=0.0)
        acc += tl.dot(x, w)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    y_ptrs = y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _config(m):
    # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps): skinny tiles for decode, square tiles for prefill.
    if m <= 16:
        return 16, 32, 128, 4
    if m <= 64:
        return 32, 64, 64, 4
    return 128, 128, 64, 8


def linear(x, w):
    m, k = x.shape
    n = w.shape[0]
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    bm, bn, bk, nw = _config(m)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _linear_kernel[grid](x, w, y, m, n, k, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                         y.stride(0), y.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=nw)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 8192, out_features: int = 8192):
        super().__init__()
        # Same initialisation as the task's Model (the harness also loads its state dict over it).
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x.contiguous(), self.weight)
