"""Grouped-query decode attention over a padded contiguous KV cache with per-sequence lengths, bf16."""

import math

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 3,
    "op_family": "attention",
    "dtypes": ["bf16", "int32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """q: [B, H, D]; k_cache/v_cache: [B, L_max, H_kv, D]; seq_lens: int32 [B] in [1, L_max].
    Positions >= seq_lens[b] are padding and must be ignored. Returns [B, H, D] in q's dtype.
    """

    def __init__(self, num_heads: int = 32, num_kv_heads: int = 8, head_size: int = 128):
        super().__init__()
        self.group = num_heads // num_kv_heads
        self.scale = 1.0 / math.sqrt(head_size)

    def forward(self, q, k_cache, v_cache, seq_lens):
        l_max = k_cache.shape[1]
        k = k_cache.float().repeat_interleave(self.group, dim=2)  # [B, L, H, D]
        v = v_cache.float().repeat_interleave(self.group, dim=2)
        scores = torch.einsum("bhd,blhd->bhl", q.float(), k) * self.scale
        pos = torch.arange(l_max, device=q.device)
        valid = pos[None, :] < seq_lens[:, None].long()  # [B, L]
        scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
        p = torch.softmax(scores, dim=-1)
        return torch.einsum("bhl,blhd->bhd", p, v).to(q.dtype)


def _inputs(b, h, hkv, d, l_max, min_len=1):
    def make():
        q = torch.randn(b, h, d).to(torch.bfloat16)
        k = torch.randn(b, l_max, hkv, d).to(torch.bfloat16)
        v = torch.randn(b, l_max, hkv, d).to(torch.bfloat16)
        seq_lens = torch.randint(min_len, l_max + 1, (b,)).to(torch.int32)
        return [q, k, v, seq_lens]
    return make


def get_inputs():
    return _inputs(32, 32, 8, 128, 4096, min_len=2048)()


def get_init_inputs():
    return [32, 8, 128]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(2, 8, 2, 64, 128), "init_inputs": [8, 2, 64]},
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(2, 12, 4, 128, 200), "init_inputs": [12, 4, 128]},
        {"name": "decode_32x4096_llama8b", "tags": ["performance"], "inputs": _inputs(32, 32, 8, 128, 4096, 2048),
         "init_inputs": [32, 8, 128], "flops": 4 * 32 * 32 * 128 * 3072},
        {"name": "decode_4x32768_llama70b_tp8", "tags": ["performance"],
         "inputs": _inputs(4, 8, 1, 128, 32768, 16384), "init_inputs": [8, 1, 128],
         "flops": 4 * 4 * 8 * 128 * 24576},
    ]
