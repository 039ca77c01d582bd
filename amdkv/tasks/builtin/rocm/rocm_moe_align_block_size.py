"""MoE align/sort: group (token, k) slots by expert in stable order, pad each expert to a block multiple, int32."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "moe",
    "dtypes": ["int32"],
    "comparator": "exact",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """topk_ids: int32 [T, topk] with expert ids in [0, num_experts). Let n = T*topk and flat = topk_ids.flatten().

    Expert e owns count_e slots, padded to P_e = ceil(count_e / block_m) * block_m; segments are laid out
    in expert order starting at offset_e = sum_{j<e} P_j; total = sum_e P_e.
    Returns
      sorted_ids  int32 [n + E*(block_m-1)]: within expert e's segment, the flat indices i with flat[i] == e in
                  increasing order, then the value n as padding; every position >= total also holds n;
      expert_ids  int32 [ceil((n + E*(block_m-1)) / block_m)]: the expert of each block of block_m entries of
                  sorted_ids for blocks below total/block_m, -1 after;
      num_tokens_post_pad int32 [1]: total.
    Every output is uniquely defined (stable order), so it is compared exactly.
    """

    def __init__(self, num_experts: int = 256, block_m: int = 64):
        super().__init__()
        self.num_experts = num_experts
        self.block_m = block_m

    def forward(self, topk_ids: torch.Tensor):
        e_num, bm = self.num_experts, self.block_m
        flat = topk_ids.flatten().long()
        n = flat.numel()
        max_padded = n + e_num * (bm - 1)
        max_blocks = (max_padded + bm - 1) // bm
        counts = torch.bincount(flat, minlength=e_num)
        padded = (counts + bm - 1) // bm * bm
        ends = torch.cumsum(padded, 0)
        starts = ends - padded
        total = int(ends[-1])
        order = torch.argsort(flat, stable=True)
        sorted_experts = flat[order]
        count_starts = torch.cumsum(counts, 0) - counts
        rank = torch.arange(n, device=flat.device) - count_starts[sorted_experts]
        sorted_ids = torch.full((max_padded,), n, dtype=torch.int32, device=flat.device)
        sorted_ids[starts[sorted_experts] + rank] = order.to(torch.int32)
        expert_ids = torch.full((max_blocks,), -1, dtype=torch.int32, device=flat.device)
        nb = total // bm
        block_start = torch.arange(nb, device=flat.device) * bm
        expert_ids[:nb] = torch.searchsorted(ends, block_start, right=True).to(torch.int32)
        num_post = torch.tensor([total], dtype=torch.int32, device=flat.device)
        return sorted_ids, expert_ids, num_post


def _inputs(t, topk, e_num):
    def make():
        ids = torch.rand(t, e_num).topk(topk, dim=-1).indices
        return [ids.to(torch.int32)]
    return make


def get_inputs():
    return _inputs(4096, 8, 256)()


def get_init_inputs():
    return [256, 64]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(13, 2, 8), "init_inputs": [8, 16]},
        {"name": "odd_e60", "tags": ["correctness"], "inputs": _inputs(100, 4, 60), "init_inputs": [60, 16]},
        {"name": "prefill_deepseek", "tags": ["performance"], "inputs": _inputs(4096, 8, 256),
         "init_inputs": [256, 64]},
        {"name": "prefill_mixtral", "tags": ["performance"], "inputs": _inputs(16384, 2, 8),
         "init_inputs": [8, 64]},
    ]
