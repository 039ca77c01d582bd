"""Maximum of an fp16 tensor over its last dimension (values only)."""

import torch
import torch.nn as nn

METADATA = {
    "level": 1,
    "op_family": "reduction",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=-1)


def get_inputs():
    return [torch.randn(16384, 8192, dtype=torch.float16)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(128, 512, dtype=torch.float16)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(5, 21, 3001, dtype=torch.float16) - 4.0]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
