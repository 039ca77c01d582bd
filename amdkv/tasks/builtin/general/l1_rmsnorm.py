"""RMSNorm with a learned scale over the hidden dimension of fp16 activations."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "norm",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.float16)]


def get_init_inputs():
    return [4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [256],
         "inputs": lambda: [torch.randn(128, 256, dtype=torch.float16)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [1500],
         "inputs": lambda: [torch.randn(2, 21, 1500, dtype=torch.float16) * 3]},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096], "inputs": get_inputs},
    ]
