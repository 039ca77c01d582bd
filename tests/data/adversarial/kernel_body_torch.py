"""Cheat (interpreter only): the "kernel" body calls PyTorch on tensors stashed in a module-level
dict. The Triton compiler would reject this; the CPU interpreter just runs the Python."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

STASH = {}


@triton.jit
def _fake(out_ptr, n, BLOCK: tl.constexpr):
    STASH["out"].copy_(STASH["x"].clamp(min=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        STASH["x"], STASH["out"] = x, out
        _fake[(1,)](out, x.numel(), BLOCK=1024)
        return out
