"""fp16 linear layer (x @ W.T + b) followed by exact GELU: a matmul with a fused epilogue."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


def get_inputs():
    return [torch.randn(4, 2048, 4096, dtype=torch.float16)]


def get_init_inputs():
    return [4096, 11008]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [128, 256],
         "inputs": lambda: [torch.randn(2, 64, 128, dtype=torch.float16)], "flops": 2 * 128 * 128 * 256},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [100, 72],
         "inputs": lambda: [torch.randn(3, 50, 100, dtype=torch.float16)], "flops": 2 * 150 * 100 * 72},
        {"name": "llm_up", "tags": ["performance"], "init_inputs": [4096, 11008], "inputs": get_inputs,
         "flops": 2 * 8192 * 4096 * 11008},
    ]
