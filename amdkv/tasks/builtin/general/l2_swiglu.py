"""SwiGLU gate on bf16 activations: split the last dim in two halves a, b and return silu(a) * b."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "activation",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(8192, 2 * 11008, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(64, 512, dtype=torch.bfloat16) * 2]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(3, 17, 2 * 375, dtype=torch.bfloat16) * 2]},
        {"name": "llm", "tags": ["performance"], "inputs": get_inputs},
    ]
