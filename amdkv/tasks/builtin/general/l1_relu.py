"""ReLU over a 2-D activation tensor."""

import torch
import torch.nn as nn

METADATA = {
    "level": 1,
    "op_family": "elementwise",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 128)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(37, 1001)]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
