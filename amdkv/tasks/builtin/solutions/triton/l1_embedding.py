"""Reference Triton solution for l1_embedding: one program per (token, column block) copies a table row slice."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _embedding_kernel(ids_ptr, w_ptr, out_ptr, dim, BLOCK_D: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < dim
    row = tl.load(ids_ptr + tok).to(tl.int64)
    v = tl.load(w_ptr + row * dim + cols, mask=mask)
    tl.store(out_ptr + tok * dim + cols, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, dim, dtype=torch.float16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        ids_flat = ids.contiguous().view(-1)
        w = self.weight.contiguous()
        dim = w.shape[1]
        out = torch.empty((ids_flat.numel(), dim), dtype=w.dtype, device=ids.device)
        BLOCK_D = min(1024, triton.next_power_of_2(dim))
        grid = (ids_flat.numel(), triton.cdiv(dim, BLOCK_D))
        _embedding_kernel[grid](ids_flat, w, out, dim, BLOCK_D=BLOCK_D, num_warps=4)
        return out.view(tuple(ids.shape) + (dim,))
