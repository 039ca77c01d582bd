"""Residual add then LayerNorm on bf16 activations; returns the normalised output and the new residual stream."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "norm",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.bfloat16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden)).to(torch.bfloat16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        h = x + residual
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps), h


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.bfloat16), torch.randn(8192, 4096, dtype=torch.bfloat16)]


def get_init_inputs():
    return [4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [256],
         "inputs": lambda: [torch.randn(64, 256, dtype=torch.bfloat16), torch.randn(64, 256, dtype=torch.bfloat16)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [1000],
         "inputs": lambda: [torch.randn(3, 11, 1000, dtype=torch.bfloat16) + 1,
                            torch.randn(3, 11, 1000, dtype=torch.bfloat16) * 2]},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096], "inputs": get_inputs},
    ]
