"""fp16 matrix multiplication with a transposed right operand, C = A @ B.T (a linear layer without bias)."""

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
        return a @ b.t()


def _mk(m, n, k):
    return lambda: [torch.randn(m, k, dtype=torch.float16), torch.randn(n, k, dtype=torch.float16)]


def get_inputs():
    return _mk(8192, 4096, 4096)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(128, 128, 64), "flops": 2 * 128 * 128 * 64},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(150, 90, 123), "flops": 2 * 150 * 90 * 123},
        {"name": "llm_proj", "tags": ["performance"], "inputs": get_inputs, "flops": 2 * 8192 * 4096 * 4096},
    ]
