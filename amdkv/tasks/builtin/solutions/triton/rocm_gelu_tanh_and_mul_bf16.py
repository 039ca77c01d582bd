"""Reference Triton solution for rocm_gelu_tanh_and_mul_bf16: 2-D grid, fp32 math, tanh through exp
(tanh(z) = 1 - 2 / (exp(2z) + 1)) so that no libdevice call is needed."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu_tanh_and_mul_kernel(x_ptr, y_ptr, D, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = cols < D
    g = tl.load(x_ptr + row * stride_x + cols, mask=m, other=0.0).to(tl.float32)
    u = tl.load(x_ptr + row * stride_x + D + cols, mask=m, other=0.0).to(tl.float32)
    z = 0.7978845608028654 * (g + 0.044715 * g * g * g)  # sqrt(2/pi) * (g + 0.044715 g^3)
    z = tl.minimum(tl.maximum(z, -15.0), 15.0)          # tanh is +-1 to fp32 precision beyond this
    t = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)
    a = (0.5 * g * (1.0 + t)).to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + row * stride_y + cols, (a * u).to(y_ptr.dtype.element_ty), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = x.shape[-1] // 2
        rows = x.numel() // x.shape[-1]
        y = torch.empty(x.shape[:-1] + (d,), dtype=x.dtype, device=x.device)
        block = min(triton.next_power_of_2(d), 2048)
        _gelu_tanh_and_mul_kernel[(rows, triton.cdiv(d, block))](x, y, d, x.shape[-1], d, BLOCK=block,
                                                                 num_warps=4)
        return y
