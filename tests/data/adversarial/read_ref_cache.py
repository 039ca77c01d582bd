"""Cheat: looks for the reference cache (where expected outputs live) in forward, reaching the open
builtin through print.__self__ so no AST rule names it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl
import os

CACHE = os.environ.get("AMDKV_CACHE_DIR") or os.environ.get("HOME", "/root") + "/.cache/amdkv"


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        opener = print.__self__.open
        with opener(CACHE + "/refs/index.json") as fh:
            fh.read()
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
