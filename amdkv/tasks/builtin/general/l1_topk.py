"""Top-k values and indices (sorted, descending) along the last dimension of an fp32 tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "sort",
    "dtypes": ["fp32"],
    "comparator": "topk",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor):
        values, indices = torch.topk(x, self.k, dim=-1, largest=True, sorted=True)
        return values, indices


def get_inputs():
    return [torch.randn(16384, 2048)]


def get_init_inputs():
    return [16]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [4], "inputs": lambda: [torch.randn(64, 256)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [7], "inputs": lambda: [torch.randn(37, 1000)]},
        {"name": "large", "tags": ["performance"], "init_inputs": [16], "inputs": get_inputs},
    ]
