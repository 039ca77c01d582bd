"""Reference Triton solution for l1_mse_loss: per-block partial sums, then one program finishes (deterministic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sq_err_partial_kernel(a_ptr, b_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(ITERS):
        offs = (pid.to(tl.int64) * ITERS + it) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        d = a - b
        acc += d * d
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _finish_mean_kernel(part_ptr, out_ptr, n_parts, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_parts, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(part_ptr + offs, mask=offs < n_parts, other=0.0)
    tl.store(out_ptr, (tl.sum(acc, axis=0) / n).to(out_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        a = pred.contiguous().view(-1)
        b = target.contiguous().view(-1)
        n = a.numel()
        BLOCK, ITERS = 1024, 8
        n_parts = triton.cdiv(n, BLOCK * ITERS)
        parts = torch.empty(n_parts, dtype=torch.float32, device=pred.device)
        out = torch.empty((), dtype=pred.dtype, device=pred.device)
        _sq_err_partial_kernel[(n_parts,)](a, b, parts, n, BLOCK=BLOCK, ITERS=ITERS, num_warps=4)
        _finish_mean_kernel[(1,)](parts, out, n_parts, n, BLOCK=1024, num_warps=4)
        return out
