"""Reference Triton solution for l1_index_add: zero-filled output, one program per source row, atomic adds."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _index_add_kernel(idx_ptr, src_ptr, out_ptr, dim, BLOCK_D: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < dim
    dst = tl.load(idx_ptr + i).to(tl.int64)
    v = tl.load(src_ptr + i * dim + cols, mask=mask, other=0.0)
    tl.atomic_add(out_ptr + dst * dim + cols, v, mask=mask, sem="relaxed")


class ModelNew(nn.Module):
    def __init__(self, num_rows: int):
        super().__init__()
        self.num_rows = num_rows

    def forward(self, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        src = src.contiguous()
        index = index.contiguous()
        T, D = src.shape
        out = torch.zeros((self.num_rows, D), dtype=src.dtype, device=src.device)
        BLOCK_D = min(1024, triton.next_power_of_2(D))
        _index_add_kernel[(T, triton.cdiv(D, BLOCK_D))](index, src, out, D, BLOCK_D=BLOCK_D, num_warps=4)
        return out
