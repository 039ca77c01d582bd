"""Llama-3-70B attention output projection (8192 -> 8192) for prefill and decode, bf16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "matmul",
    "dtypes": ["bf16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """y = x @ W^T, W of shape [out_features, in_features], bf16 weights and activations."""

    def __init__(self, in_features: int = 8192, out_features: int = 8192):
        super().__init__()
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


def _x(m, k):
    return lambda: [torch.randn(m, k).to(torch.bfloat16)]


def get_inputs():
    return _x(4096, 8192)()


def get_init_inputs():
    return [8192, 8192]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _x(64, 128), "init_inputs": [128, 96]},
        {"name": "odd", "tags": ["correctness"], "inputs": _x(33, 160), "init_inputs": [160, 200]},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 8192), "init_inputs": [8192, 8192],
         "flops": 2 * 4096 * 8192 * 8192},
        {"name": "decode_m32", "tags": ["performance"], "inputs": _x(32, 8192), "init_inputs": [8192, 8192],
         "flops": 2 * 32 * 8192 * 8192},
    ]
