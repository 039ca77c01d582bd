"""SiLU-and-mul activation of a merged gate/up tensor: silu(x[:, :d]) * x[:, d:], fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "activation",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        return F.silu(x[..., :d]) * x[..., d:]


def _x(t, i):
    return lambda: [(2.0 * torch.randn(t, 2 * i)).to(torch.float16)]


def get_inputs():
    return _x(4096, 14336)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _x(7, 300)},
        {"name": "small", "tags": ["correctness"], "inputs": _x(32, 256)},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 14336)},
        {"name": "decode_64", "tags": ["performance"], "inputs": _x(64, 14336)},
    ]
