"""GELU(tanh)-and-mul activation of a merged gate/up tensor (Gemma-style MLP), bf16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "activation",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return F.gelu(x[..., :d], approximate="tanh") * x[..., d:]


def _x(t, i):
    return lambda: [(2.0 * torch.randn(t, 2 * i)).to(torch.bfloat16)]


def get_inputs():
    return _x(4096, 14336)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _x(9, 500)},
        {"name": "small", "tags": ["correctness"], "inputs": _x(16, 512)},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 14336)},
        {"name": "decode_32", "tags": ["performance"], "inputs": _x(32, 14336)},
    ]
