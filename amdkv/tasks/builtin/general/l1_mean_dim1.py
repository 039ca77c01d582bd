"""Mean of a 3-D fp32 tensor over its middle dimension (a strided, non-innermost reduction)."""

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
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(16, 1024, 4096)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(4, 256, 128)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(3, 77, 515) + 1.0]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
