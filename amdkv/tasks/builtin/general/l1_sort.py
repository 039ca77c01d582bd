"""Stable ascending sort (values and source indices) along the last dimension of an fp32 tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "sort",
    "dtypes": ["fp32"],
    "comparator": "sort",
    "comparator_args": {"stable": True},  # the `ties` case is only well defined for a stable sort
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        values, indices = torch.sort(x, dim=-1, stable=True)
        return values, indices


def get_inputs():
    return [torch.randn(16384, 1024)]


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "ties", "tags": ["correctness"], "inputs": lambda: [torch.randint(-8, 8, (3, 128)).float()]},
        {"name": "odd", "tags": ["correctness"], "inputs": lambda: [torch.randn(2, 200) * 100]},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
