"""Wrong: assumes 128 columns per row (true for the first case only)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_rows(x_ptr, out_ptr, n_cols, COLS: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, COLS)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, tl.maximum(x, 0.0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.zeros_like(x)
        _relu_rows[(x.shape[0],)](x, out, x.shape[1], COLS=128)
        return out
