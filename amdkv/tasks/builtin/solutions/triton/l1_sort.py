"""Reference Triton solution for l1_sort: pack (order-preserving float bits, index) into int64 keys, bitonic tl.sort.

The index in the low bits makes equal values keep their original order (a stable sort). Rows up to
16384 elements, held in registers.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _sort_kernel(x_ptr, val_ptr, idx_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    bits = x.to(tl.int32, bitcast=True)
    # negative floats: flip the magnitude bits so signed-integer order equals float order
    ordered = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)
    key = (ordered.to(tl.int64) << 32) | cols.to(tl.int64)
    key = tl.where(mask, key, 0x7FFFFFFFFFFFFFFF)
    key = tl.sort(key, dim=0)
    src = (key & 0xFFFFFFFF).to(tl.int32)
    v = tl.load(x_ptr + row * n_cols + src, mask=mask, other=0.0)
    tl.store(val_ptr + row * n_cols + cols, v, mask=mask)
    tl.store(idx_ptr + row * n_cols + cols, src.to(tl.int64), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        n_cols = x.shape[-1]
        x2 = x.contiguous().view(-1, n_cols)
        values = torch.empty_like(x2)
        indices = torch.empty(x2.shape, dtype=torch.int64, device=x.device)
        BLOCK = triton.next_power_of_2(n_cols)
        assert BLOCK <= 16384, "rows longer than 16384 are not supported by this solution"
        _sort_kernel[(x2.shape[0],)](x2, values, indices, n_cols, BLOCK=BLOCK, num_warps=8)
        return values.view(x.shape), indices.view(x.shape)
