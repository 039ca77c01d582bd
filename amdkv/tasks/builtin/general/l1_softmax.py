"""Row softmax over the last dimension of a 2-D fp32 tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "softmax",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(8192, 8192)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 512) * 5]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(23, 5003) * 5]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
