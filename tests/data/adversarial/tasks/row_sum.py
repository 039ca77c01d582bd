"""Sum over the last dimension of a 2-D tensor.

Test task for the adversarial candidate set (not a bundled task).
"""

import torch
import torch.nn as nn

METADATA = {
    "level": 1,
    "op_family": "reduction",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv tests)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=-1)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(16, 256)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(13, 300)]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
