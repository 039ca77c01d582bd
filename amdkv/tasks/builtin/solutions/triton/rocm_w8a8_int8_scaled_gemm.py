"""Reference Triton solution for rocm_w8a8_int8_scaled_gemm: int8 x int8 tl.dot with int32 accumulation (exact),
dequantised in the epilogue with the per-token and per-channel scales."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _w8a8_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, stride_am, stride_bn, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
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
    mm = rm < M
    nm = rn < N
    a_ptrs = a_ptr + rm.to(tl.int64)[:, None] * stride_am + rk[None, :]
    b_ptrs = b_ptr + rn.to(tl.int64)[None, :] * stride_bn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k0 in range(0, K, BLOCK_K):
        km = (k0 + rk) < K
        a = tl.load(a_ptrs, mask=mm[:, None] & km[None, :], other=0)
        b = tl.load(b_ptrs, mask=nm[None, :] & km[:, None], other=0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    a_s = tl.load(as_ptr + rm, mask=mm, other=0.0)
    b_s = tl.load(bs_ptr + rn, mask=nm, other=0.0)
    out = acc.to(tl.float32) * a_s[:, None] * b_s[None, :]
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], out.to(c_ptr.dtype.element_ty),
             mask=mm[:, None] & nm[None, :])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, a_scale, b, b_scale):
        a = a.contiguous()
        b = b.contiguous()
        a_scale = a_scale.contiguous()
        b_scale = b_scale.contiguous()
        m, k = a.shape
        n = b.shape[0]
        c = torch.empty((m, n), dtype=torch.float16, device=a.device)
        if m <= 16:
            bm, bn, bk, nw = 16, 64, 128, 4
        elif m <= 64:
            bm, bn, bk, nw = 32, 64, 128, 4
        else:
            bm, bn, bk, nw = 128, 128, 64, 8
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        _w8a8_kernel[grid](a, a_scale, b, b_scale, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                           BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=nw)
        return c
