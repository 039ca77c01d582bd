"""Reference Triton solution for l2_w8a16_matmul: int8 tiles converted to fp16 in registers, tl.dot, per-column scale applied once to the fp32 accumulator."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _w8a16_kernel(x_ptr, wq_ptr, s_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
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
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = wq_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] + k0 < K) & (rn[None, :] < N), other=0)
        acc = tl.dot(a, w.to(a.dtype), acc)  # |int8| <= 127 is exact in fp16/bf16
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    scale = tl.load(s_ptr + rn, mask=rn < N, other=0.0)
    acc = acc * scale[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("wq", torch.empty((out_features, in_features), dtype=torch.int8))
        self.register_buffer("scale", torch.empty(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = x.shape[-1]
        x2 = x.contiguous().view(-1, K)
        M = x2.shape[0]
        N = self.wq.shape[0]
        out = torch.empty((M, N), dtype=x.dtype, device=x.device)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 64
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        _w8a16_kernel[grid](x2, self.wq.contiguous(), self.scale.contiguous(), out, M, N, K,
                            BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=8, num_warps=8)
        return out.view(tuple(x.shape[:-1]) + (N,))
