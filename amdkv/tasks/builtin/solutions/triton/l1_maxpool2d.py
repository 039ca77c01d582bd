"""Reference Triton solution for l1_maxpool2d: one program per (plane, block of output pixels)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _maxpool2d_kernel(x_ptr, out_ptr, H, W, OH, OW, STRIDE, PAD,
                      KS: tl.constexpr, BLOCK: tl.constexpr):
    plane = tl.program_id(1).to(tl.int64)
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pmask = p < OH * OW
    oh = p // OW
    ow = p % OW
    x_base = x_ptr + plane * H * W
    acc = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    for kh in tl.static_range(KS):
        ih = oh * STRIDE + kh - PAD
        for kw in tl.static_range(KS):
            iw = ow * STRIDE + kw - PAD
            m = pmask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            v = tl.load(x_base + ih * W + iw, mask=m, other=float("-inf")).to(tl.float32)
            acc = tl.maximum(acc, v)
    tl.store(out_ptr + plane * OH * OW + p, acc.to(out_ptr.dtype.element_ty), mask=pmask)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        N, C, H, W = x.shape
        k, s, p = self.kernel_size, self.stride, self.padding
        OH = (H + 2 * p - k) // s + 1
        OW = (W + 2 * p - k) // s + 1
        out = torch.empty((N, C, OH, OW), dtype=x.dtype, device=x.device)
        BLOCK = 256
        _maxpool2d_kernel[(triton.cdiv(OH * OW, BLOCK), N * C)](x, out, H, W, OH, OW, s, p, KS=k, BLOCK=BLOCK,
                                                               num_warps=4)
        return out
