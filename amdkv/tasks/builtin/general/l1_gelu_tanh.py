"""GELU with the tanh approximation over an fp16 activation tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "activation",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.float16)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(32, 512, dtype=torch.float16) * 3]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(3, 41, 333, dtype=torch.float16) * 3]},
        {"name": "llm", "tags": ["performance"], "inputs": get_inputs},
    ]
