"""Fault: fills GPU memory, 1 GiB at a time, until the allocator refuses (the candidate's share of the
GPU, gpu_mem_fraction): runtime_error / oom, and the next candidate on the GPU gets its memory back."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        hogs = []
        for _ in range(1024):
            hogs.append(torch.empty(1 << 30, dtype=torch.uint8, device=x.device).fill_(1))
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
