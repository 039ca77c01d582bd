"""Wrong (the issue's case): one program per row with BLOCK = the next power of two of the row
length; the load is masked, the store is not. Each row's store runs past its end: interior rows
spill into the next row (which its own program overwrites later, so the interpreter's outputs
are right) and the last row writes past the end of the output."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_rows(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row * N + cols, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty_like(x)
        _relu_rows[(M,)](x, out, N, BLOCK=triton.next_power_of_2(N))
        return out
