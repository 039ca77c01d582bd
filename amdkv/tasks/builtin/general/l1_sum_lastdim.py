"""Sum of a 2-D fp32 tensor over its last dimension."""

import torch
import torch.nn as nn

METADATA = {
    "level": 1,
    "op_family": "reduction",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 1024)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(37, 4099) + 0.5]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
