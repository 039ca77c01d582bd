"""Compile error: not valid Python."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
