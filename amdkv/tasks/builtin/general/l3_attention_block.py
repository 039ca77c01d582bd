"""Causal multi-head self-attention block in fp16: fused QKV projection, attention written out, output projection."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "attention",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False, dtype=torch.float16)
        self.proj = nn.Linear(hidden, hidden, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, S, Hd = x.shape
        hd = Hd // self.n_heads
        q, k, v = self.qkv(x).view(B, S, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        future = torch.ones(S, S, dtype=torch.bool, device=scores.device).triu(1)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(B, S, Hd)
        return self.proj(out)


def _flops(b, s, hd, nh):
    return 2 * b * s * hd * 4 * hd + 2 * b * s * s * hd  # projections + causal attention (two half matmuls)


def get_inputs():
    return [torch.randn(4, 2048, 4096, dtype=torch.float16)]


def get_init_inputs():
    return [4096, 32]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [128, 4],
         "inputs": lambda: [torch.randn(2, 64, 128, dtype=torch.float16)], "flops": _flops(2, 64, 128, 4)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [64, 2],
         "inputs": lambda: [torch.randn(1, 99, 64, dtype=torch.float16)], "flops": _flops(1, 99, 64, 2)},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096, 32], "inputs": get_inputs,
         "flops": _flops(4, 2048, 4096, 32)},
    ]
