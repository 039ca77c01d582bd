"""LayerNorm with learned affine over the hidden dimension of fp32 activations."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "norm",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.bias = nn.Parameter(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [512],
         "inputs": lambda: [torch.randn(64, 512) * 2 + 1]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [1000],
         "inputs": lambda: [torch.randn(3, 13, 1000) * 3 - 2]},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096], "inputs": get_inputs},
    ]
