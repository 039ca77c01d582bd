"""Crash: unbounded recursion through a C builtin (`map`, `sum`) with the recursion limit lifted
overflows the C stack, which kills the worker with SIGSEGV before it reports. (Python 3.11 runs
plain Python-to-Python calls without the C stack, so the recursion goes through C.)"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _deeper(depth):
    return sum(map(_deeper, (depth + 1,)))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        _copy[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        sys.setrecursionlimit(1 << 30)
        _deeper(0)
        return out
