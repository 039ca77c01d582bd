"""SiLU (x * sigmoid(x)) over a bf16 activation tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "activation",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs():
    return [torch.randn(8192, 14336, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 256, dtype=torch.bfloat16) * 4]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(19, 1111, dtype=torch.bfloat16) * 4]},
        {"name": "llm", "tags": ["performance"], "inputs": get_inputs},
    ]
