"""GroupNorm with per-channel affine over an NCHW fp32 feature map."""

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
    def __init__(self, channels: int, groups: int, eps: float = 1e-5):
        super().__init__()
        self.groups = groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.groups, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(16, 512, 64, 64)]


def get_init_inputs():
    return [512, 32]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [32, 8],
         "inputs": lambda: [torch.randn(2, 32, 16, 16) * 2 + 0.5]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [30, 5],
         "inputs": lambda: [torch.randn(3, 30, 7, 9) * 3 - 1]},
        {"name": "large", "tags": ["performance"], "init_inputs": [512, 32], "inputs": get_inputs},
    ]
