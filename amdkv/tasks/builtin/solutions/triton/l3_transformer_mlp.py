"""Reference Triton solution for l3_transformer_mlp: one kernel computes gate and up tiles together and applies silu*up; a second GEMM does the down projection."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gate_up_kernel(x_ptr, wg_ptr, wu_ptr, h_ptr, M, N, K,
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
    w_off = rn[None, :].to(tl.int64) * K + rk[:, None]
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k0 < K), other=0.0)
        wmask = (rk[:, None] + k0 < K) & (rn[None, :] < N)
        wg = tl.load(wg_ptr + w_off + k0, mask=wmask, other=0.0)
        wu = tl.load(wu_ptr + w_off + k0, mask=wmask, other=0.0)
        acc_g = tl.dot(a, wg, acc_g)
        acc_u = tl.dot(a, wu, acc_u)
        x_ptrs += BLOCK_K
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(h_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], h.to(h_ptr.dtype.element_ty), mask=mask)


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


class ModelNew(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False, dtype=torch.float16)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False, dtype=torch.float16)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        K = x.shape[-1]
        x2 = x.contiguous().view(-1, K)
        M = x2.shape[0]
        wg = self.gate_proj.weight.contiguous()
        wu = self.up_proj.weight.contiguous()
        N = wg.shape[0]
        h = torch.empty((M, N), dtype=x.dtype, device=x.device)
        BLOCK_M, BLOCK_N, BLOCK_K = 128, 64, 32
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        _gate_up_kernel[grid](x2, wg, wu, h, M, N, K, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                              GROUP_M=8, num_warps=8)
        y = _linear(h, self.down_proj.weight.contiguous())
        return y.view(x.shape)
