"""Wrong: 2-D tiles through block pointers; the load has boundary_check, the store does not, so
the tiles on the bottom edge store past the end of the output (and the right-edge tiles spill
into the next row). Block pointers exist in triton <= 3.8 (3.9 removed them)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu_tiles(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0) * BM
    pn = tl.program_id(1) * BN
    xb = tl.make_block_ptr(x_ptr, shape=(M, N), strides=(N, 1), offsets=(pm, pn), block_shape=(BM, BN),
                           order=(1, 0))
    ob = tl.make_block_ptr(out_ptr, shape=(M, N), strides=(N, 1), offsets=(pm, pn), block_shape=(BM, BN),
                           order=(1, 0))
    x = tl.load(xb, boundary_check=(0, 1), padding_option="zero")
    tl.store(ob, tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        M, N = x.shape
        out = torch.empty_like(x)
        _relu_tiles[(triton.cdiv(M, 16), triton.cdiv(N, 64))](x, out, M, N, BM=16, BN=64)
        return out
