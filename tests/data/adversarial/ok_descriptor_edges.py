"""Correct: a 1-D tensor descriptor of the true length; the descriptor masks the last block's
lanes past the end (their addresses are computed but never touched)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_desc(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    od = tl.make_tensor_descriptor(out_ptr, shape=[n], strides=[1], block_shape=[BLOCK])
    start = tl.program_id(0) * BLOCK
    od.store([start], tl.maximum(xd.load([start]), 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        _relu_desc[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
