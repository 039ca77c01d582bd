"""Batched fp32 matrix multiplication (torch.bmm)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "matmul",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def _mk(bs, m, k, n):
    return lambda: [torch.randn(bs, m, k), torch.randn(bs, k, n)]


def get_inputs():
    return _mk(32, 1024, 1024, 1024)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(4, 64, 48, 128), "flops": 2 * 4 * 64 * 48 * 128},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(3, 70, 33, 45), "flops": 2 * 3 * 70 * 33 * 45},
        {"name": "batched1k", "tags": ["performance"], "inputs": get_inputs, "flops": 2 * 32 * 1024 ** 3},
    ]
