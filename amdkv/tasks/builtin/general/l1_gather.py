"""torch.gather along dim 1 of a 2-D fp32 tensor with int64 indices."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "index",
    "dtypes": ["fp32", "int64"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, index)


def _mk(m, n, k):
    return lambda: [torch.randn(m, n), torch.randint(0, n, (m, k))]


def get_inputs():
    return _mk(8192, 4096, 2048)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(64, 256, 128)},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(37, 1001, 333)},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
