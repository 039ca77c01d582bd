"""Inclusive prefix sum along the last dimension of a 2-D fp32 tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "scan",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 16384)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(32, 2048)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(19, 3333) + 0.1]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
