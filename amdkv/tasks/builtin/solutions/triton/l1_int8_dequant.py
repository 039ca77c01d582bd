"""Reference Triton solution for l1_int8_dequant: 2-D tiles, fp32 product, fp16 store."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _dequant_kernel(q_ptr, s_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None].to(tl.int64) * N + rn[None, :]
    q = tl.load(q_ptr + offs, mask=mask, other=0).to(tl.float32)
    s = tl.load(s_ptr + rm, mask=rm < M, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (q * s[:, None]).to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        q = q.contiguous()
        scale = scale.contiguous()
        M, N = q.shape
        out = torch.empty((M, N), dtype=torch.float16, device=q.device)
        BLOCK_M, BLOCK_N = 16, 256
        _dequant_kernel[(triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))](q, scale, out, M, N,
                                                                           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                                                           num_warps=4)
        return out
