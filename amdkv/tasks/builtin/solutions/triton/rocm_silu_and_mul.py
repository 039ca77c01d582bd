"""Reference Triton solution for rocm_silu_and_mul: 2-D grid (row, column block), fp32 math."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, y_ptr, D, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    g = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + D + cols, mask=m, other=0.0).to(tl.float32)
    # Round silu(g) to the tensor dtype before the product, as the eager silu -> mul pipeline does.
    s = (g / (1.0 + tl.exp(-g))).to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (s * u).to(y_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = x.shape[-1] // 2
        rows = x.numel() // x.shape[-1]
        y = torch.empty(x.shape[:-1] + (d,), dtype=x.dtype, device=x.device)
        block = min(triton.next_power_of_2(d), 2048)
        _silu_and_mul_kernel[(rows, triton.cdiv(d, block))](x, y, d, x.shape[-1], d, BLOCK=block, num_warps=4)
        return y
