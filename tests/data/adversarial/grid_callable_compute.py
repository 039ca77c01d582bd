"""Cheat: computes the result with PyTorch inside the grid callable, which the launcher calls while
the kernel launch is in progress; the kernel itself does nothing."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _noop(out_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)

        def grid(meta):
            out.copy_(x.clip(min=0))  # `clip` is not in the static list: the op recorder must see it
            return (1,)

        _noop[grid](out, x.numel(), BLOCK=1024)
        return out
