"""Row-wise int8 dequantisation: int8 codes times a per-row fp32 scale, returned as fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "quant",
    "dtypes": ["int8", "fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return (q.to(scale.dtype) * scale[:, None]).to(torch.float16)


def _mk(m, n):
    return lambda: [torch.randint(-127, 128, (m, n), dtype=torch.int8), torch.rand(m) * 0.05 + 1e-3]


def get_inputs():
    return _mk(14336, 4096)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(64, 512)},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(45, 1003)},
        {"name": "weight", "tags": ["performance"], "inputs": get_inputs},
    ]
