"""Index of the maximum along the last dimension of fp32 logits (greedy decoding)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "reduction",
    "dtypes": ["fp32"],
    "comparator": "argmax",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 32000)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 1024)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(33, 5001)]},
        {"name": "vocab", "tags": ["performance"], "inputs": get_inputs},
    ]
