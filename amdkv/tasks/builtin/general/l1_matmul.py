"""Plain fp16 matrix multiplication C = A @ B."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "matmul",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def _mk(m, k, n):
    return lambda: [torch.randn(m, k, dtype=torch.float16), torch.randn(k, n, dtype=torch.float16)]


def get_inputs():
    return _mk(4096, 4096, 4096)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(128, 96, 256), "flops": 2 * 128 * 96 * 256},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(200, 136, 77), "flops": 2 * 200 * 136 * 77},
        {"name": "square4k", "tags": ["performance"], "inputs": get_inputs, "flops": 2 * 4096 ** 3},
    ]
