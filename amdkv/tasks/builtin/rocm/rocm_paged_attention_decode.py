"""Paged-attention decode: one query token per sequence against a paged KV cache with block tables, fp16."""

import math

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 3,
    "op_family": "attention",
    "dtypes": ["fp16", "int32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """query: [S, H, D]; key_cache/value_cache: [num_blocks, block_size, H_kv, D];
    block_tables: int32 [S, max_blocks] (distinct page ids); context_lens: int32 [S] (>= 1).
    Query head h attends to kv head h // (H / H_kv). Returns [S, H, D] in the query dtype.
    """

    def __init__(self, num_heads: int = 32, num_kv_heads: int = 8, head_size: int = 128):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_size = head_size
        self.scale = 1.0 / math.sqrt(head_size)

    def forward(self, query, key_cache, value_cache, block_tables, context_lens):
        num_seqs = query.shape[0]
        block_size = key_cache.shape[1]
        group = self.num_heads // self.num_kv_heads
        out = torch.empty_like(query)
        for s in range(num_seqs):
            n = int(context_lens[s])
            nblk = (n + block_size - 1) // block_size
            pages = block_tables[s, :nblk].long()
            k = key_cache[pages].reshape(-1, self.num_kv_heads, self.head_size)[:n].float()
            v = value_cache[pages].reshape(-1, self.num_kv_heads, self.head_size)[:n].float()
            k = k.repeat_interleave(group, dim=1)  # [n, H, D]
            v = v.repeat_interleave(group, dim=1)
            q = query[s].float()  # [H, D]
            scores = torch.einsum("hd,nhd->hn", q, k) * self.scale
            p = torch.softmax(scores, dim=-1)
            out[s] = torch.einsum("hn,nhd->hd", p, v).to(query.dtype)
        return out


def _inputs(num_seqs, h, hkv, d, block_size, max_blocks, num_blocks, min_len=1):
    def make():
        query = torch.randn(num_seqs, h, d).to(torch.float16)
        key_cache = torch.randn(num_blocks, block_size, hkv, d).to(torch.float16)
        value_cache = torch.randn(num_blocks, block_size, hkv, d).to(torch.float16)
        block_tables = torch.randperm(num_blocks)[: num_seqs * max_blocks].view(num_seqs, max_blocks)
        context_lens = torch.randint(min_len, max_blocks * block_size + 1, (num_seqs,))
        return [query, key_cache, value_cache, block_tables.to(torch.int32), context_lens.to(torch.int32)]
    return make


def get_inputs():
    return _inputs(64, 32, 8, 128, 16, 256, 16384, min_len=2048)()


def get_init_inputs():
    return [32, 8, 128]


def _flops(s, h, d, ctx):
    return 4 * s * h * d * ctx


def get_cases():
    return [
        {"name": "small_gqa", "tags": ["correctness"], "inputs": _inputs(3, 4, 2, 64, 16, 7, 32),
         "init_inputs": [4, 2, 64]},
        {"name": "odd_mha_d96", "tags": ["correctness"], "inputs": _inputs(4, 3, 3, 96, 16, 5, 24),
         "init_inputs": [3, 3, 96]},
        {"name": "decode_64x4096_llama8b", "tags": ["performance"],
         "inputs": _inputs(64, 32, 8, 128, 16, 256, 16384, min_len=2048), "init_inputs": [32, 8, 128],
         "flops": _flops(64, 32, 128, 3072)},
        {"name": "decode_8x8192_mha", "tags": ["performance"],
         "inputs": _inputs(8, 32, 32, 128, 16, 512, 4096, min_len=4096), "init_inputs": [32, 32, 128],
         "flops": _flops(8, 32, 128, 6144)},
    ]
