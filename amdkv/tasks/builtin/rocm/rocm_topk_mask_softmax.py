"""Sampling prep: temperature, per-row top-k logits mask (ties at the k-th value kept) and softmax, fp32."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "softmax",
    "dtypes": ["fp32", "int32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """logits: [B, V]; temperature: fp32 [B] (> 0); top_k: int32 [B] in [1, V].
    s = logits / temperature; kth = k-th largest value of s in its row; entries with s < kth are dropped
    (every entry equal to kth is kept); returns softmax over the kept entries (0 elsewhere), fp32.
    """

    def __init__(self):
        super().__init__()

    def forward(self, logits, temperature, top_k):
        s = logits / temperature[:, None]
        desc = s.sort(dim=-1, descending=True).values
        kth = desc.gather(1, (top_k.long() - 1)[:, None])
        s = s.masked_fill(s < kth, float("-inf"))
        return torch.softmax(s, dim=-1)


def _inputs(b, v, max_k, ties=False):
    def make():
        if ties:
            logits = torch.randint(-6, 7, (b, v)).float()
        else:
            logits = 4.0 * torch.randn(b, v)
        temperature = torch.rand(b) * 1.3 + 0.2
        top_k = torch.randint(1, max_k + 1, (b,)).to(torch.int32)
        return [logits, temperature, top_k]
    return make


def get_inputs():
    return _inputs(64, 128256, 1000)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(2, 1000, 1000)},
        {"name": "ties", "tags": ["correctness"], "inputs": _inputs(2, 2999, 300, ties=True)},
        {"name": "decode_64_llama3_vocab", "tags": ["performance"], "inputs": _inputs(64, 128256, 1000)},
        {"name": "decode_8_qwen_vocab", "tags": ["performance"], "inputs": _inputs(8, 151936, 50)},
    ]
