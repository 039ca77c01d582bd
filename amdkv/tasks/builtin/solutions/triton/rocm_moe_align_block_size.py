"""Reference Triton solution for rocm_moe_align_block_size: three small kernels, all bookkeeping on the GPU.
1) one program per expert counts its (token, k) slots; 2) one program turns counts into padded segment offsets,
the per-block expert ids, the padded total and the tail padding; 3) one program per expert writes its slot
indices in increasing order (running prefix sums make the order stable) and pads its segment."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    c = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(ids_ptr + offs, mask=offs < n, other=-1)
        c += (x == e).to(tl.int32)
    tl.store(counts_ptr + e, tl.sum(c, axis=0))


@triton.jit
def _offsets_kernel(counts_ptr, starts_ptr, sorted_ptr, expert_ids_ptr, num_post_ptr, E, n, max_padded,
                    max_blocks, BM: tl.constexpr, E_PAD: tl.constexpr, BLOCK_B: tl.constexpr,
                    BLOCK: tl.constexpr):
    e = tl.arange(0, E_PAD)
    em = e < E
    cnt = tl.load(counts_ptr + e, mask=em, other=0)
    padded = (cnt + BM - 1) // BM * BM
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded
    total = tl.sum(padded, axis=0)
    tl.store(starts_ptr + e, starts, mask=em)
    tl.store(num_post_ptr, total)
    # Expert of each block: the number of segments that end at or before the block's first entry.
    for b0 in range(0, max_blocks, BLOCK_B):
        blk = b0 + tl.arange(0, BLOCK_B)
        pos = blk * BM
        before = (ends[None, :] <= pos[:, None]) & em[None, :]
        ex = tl.sum(before.to(tl.int32), axis=1)
        ex = tl.where(pos < total, ex, -1)
        tl.store(expert_ids_ptr + blk, ex, mask=blk < max_blocks)
    # Everything past the padded total holds the padding value n.
    for s0 in range(total, max_padded, BLOCK):
        offs = s0 + tl.arange(0, BLOCK)
        tl.store(sorted_ptr + offs, tl.full((BLOCK,), 0, tl.int32) + n, mask=offs < max_padded)


@triton.jit
def _scatter_kernel(ids_ptr, starts_ptr, sorted_ptr, n, BM: tl.constexpr, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    seg = tl.load(starts_ptr + e)
    run = 0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(ids_ptr + offs, mask=offs < n, other=-1)
        hit = (x == e).to(tl.int32)
        pos = run + tl.cumsum(hit, axis=0) - 1
        tl.store(sorted_ptr + seg + pos, offs, mask=hit == 1)
        run += tl.sum(hit, axis=0)
    padded = (run + BM - 1) // BM * BM
    p = run + tl.arange(0, BM)
    tl.store(sorted_ptr + seg + p, tl.full((BM,), 0, tl.int32) + n, mask=p < padded)


class ModelNew(nn.Module):
    def __init__(self, num_experts: int = 256, block_m: int = 64):
        super().__init__()
        self.num_experts = num_experts
        self.block_m = block_m

    def forward(self, topk_ids: torch.Tensor):
        ids = topk_ids.contiguous().view(-1)
        e_num, bm = self.num_experts, self.block_m
        n = ids.numel()
        max_padded = n + e_num * (bm - 1)
        max_blocks = triton.cdiv(max_padded, bm)
        dev = ids.device
        counts = torch.empty(e_num, dtype=torch.int32, device=dev)
        starts = torch.empty(e_num, dtype=torch.int32, device=dev)
        sorted_ids = torch.empty(max_padded, dtype=torch.int32, device=dev)
        expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=dev)
        num_post = torch.empty(1, dtype=torch.int32, device=dev)
        block = 1024
        _count_kernel[(e_num,)](ids, counts, n, BLOCK=block, num_warps=4)
        e_pad = triton.next_power_of_2(e_num)
        _offsets_kernel[(1,)](counts, starts, sorted_ids, expert_ids, num_post, e_num, n, max_padded,
                              max_blocks, BM=bm, E_PAD=e_pad, BLOCK_B=max(1, 8192 // e_pad), BLOCK=block,
                              num_warps=4)
        _scatter_kernel[(e_num,)](ids, starts, sorted_ids, n, BM=bm, BLOCK=block, num_warps=4)
        return sorted_ids, expert_ids, num_post
