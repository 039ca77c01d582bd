"""Log-softmax over the vocabulary dimension of fp16 logits."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "softmax",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 32000, dtype=torch.float16) * 4]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(32, 1024, dtype=torch.float16) * 4]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(2, 9, 3000, dtype=torch.float16) * 4]},
        {"name": "vocab", "tags": ["performance"], "inputs": get_inputs},
    ]
