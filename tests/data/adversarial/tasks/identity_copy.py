"""Identity: the output equals the input (must still be fresh memory).

Test task for the adversarial candidate set (not a bundled task).
"""

import torch
import torch.nn as nn

METADATA = {
    "level": 1,
    "op_family": "elementwise",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv tests)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


def get_inputs():
    return [torch.randn(2048, 2048)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(32, 128)]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(19, 333)]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
