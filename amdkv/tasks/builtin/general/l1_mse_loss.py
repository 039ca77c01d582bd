"""Mean squared error between two fp32 tensors, reduced to a scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "loss",
    "dtypes": ["fp32"],
    "comparator": "scalar",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(pred, target)


def _mk(*shape):
    return lambda: [torch.randn(*shape), torch.randn(*shape) * 0.5 + 0.2]


def get_inputs():
    return _mk(8192, 8192)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(128, 256)},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(3, 77, 1001)},
        {"name": "large", "tags": ["performance"], "inputs": get_inputs},
    ]
