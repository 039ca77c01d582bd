"""fp32 matmul whose inputs are non-contiguous views (a column-major A and a column slice of a wider B)."""

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
        return torch.matmul(a, b)


def _mk(m, k, n, pad):
    # a: (m, k) view of a (k, m) buffer; b: the first n columns of a (k, n + pad) buffer
    return lambda: [torch.randn(k, m).t(), torch.randn(k, n + pad)[:, :n]]


def get_inputs():
    return _mk(4096, 4096, 4096, 64)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(96, 64, 128, 16), "flops": 2 * 96 * 64 * 128},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(75, 130, 51, 7), "flops": 2 * 75 * 130 * 51},
        {"name": "square4k", "tags": ["performance"], "inputs": get_inputs, "flops": 2 * 4096 ** 3},
    ]
