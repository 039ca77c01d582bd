"""Rotary position embedding (rotate-half form) applied to bf16 query/key heads laid out (batch, heads, seq, head_dim)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "elementwise",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, head_dim: int, max_seq: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", torch.cos(angles).float())
        self.register_buffer("sin", torch.sin(angles).float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, half = x.shape[2], x.shape[3] // 2
        c, s = self.cos[:seq], self.sin[:seq]
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def get_inputs():
    return [torch.randn(8, 32, 4096, 128, dtype=torch.bfloat16)]


def get_init_inputs():
    return [128, 4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [64, 128],
         "inputs": lambda: [torch.randn(2, 4, 128, 64, dtype=torch.bfloat16)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [32, 200],
         "inputs": lambda: [torch.randn(1, 3, 77, 32, dtype=torch.bfloat16)]},
        {"name": "llm", "tags": ["performance"], "init_inputs": [128, 4096], "inputs": get_inputs},
    ]
