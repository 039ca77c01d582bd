"""Mean cross-entropy of fp32 logits against int64 class targets (log-softmax + NLL), a scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "loss",
    "dtypes": ["fp32", "int64"],
    "comparator": "scalar",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target)


def _mk(m, v):
    return lambda: [torch.randn(m, v) * 3, torch.randint(0, v, (m,))]


def get_inputs():
    return _mk(4096, 32000)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(64, 1000)},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(37, 5003)},
        {"name": "vocab", "tags": ["performance"], "inputs": get_inputs},
    ]
