"""Wrong: a kernel that never terminates on any platform. It spins on a volatile load of its own
input, which no compiler may remove. (infinite_loop.py's side-effect-free counting loop is finite
in wrapping arithmetic, so a GPU compiler deletes it; a 64-bit counter was deleted the same way on
an H200: the kernel finished at once.)"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    first = tl.load(x_ptr)
    while tl.load(x_ptr, volatile=True) == first:
        pass  # the spin itself: the volatile load in the condition is the loop's only work
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _spin[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
