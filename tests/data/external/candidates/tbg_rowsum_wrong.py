# A wrong kernel for the TritonBench-G fixture tiny_rowsum: it drops the last column.
import torch
import triton
import triton.language as tl


@triton.jit
def rowsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols - 1, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=0))


def row_sum(x):
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=x.dtype)
    rowsum_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
    return out
