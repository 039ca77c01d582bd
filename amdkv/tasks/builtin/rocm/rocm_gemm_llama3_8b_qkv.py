"""Llama-3-8B fused QKV projection (4096 -> 4096 + 2*1024) as used in decode and prefill, fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "matmul",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """y = x @ W^T with W of shape [out_features, in_features] (no bias, as in Llama)."""

    def __init__(self, in_features: int = 4096, out_features: int = 6144):
        super().__init__()
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


def _x(m, k):
    return lambda: [torch.randn(m, k).to(torch.float16)]


def get_inputs():
    return _x(4096, 4096)()


def get_init_inputs():
    return [4096, 6144]


def get_cases():
    return [
        {"name": "decode_m7", "tags": ["correctness"], "inputs": _x(7, 256), "init_inputs": [256, 384]},
        {"name": "prefill_odd", "tags": ["correctness"], "inputs": _x(100, 192), "init_inputs": [192, 160]},
        {"name": "decode_m16", "tags": ["performance"], "inputs": _x(16, 4096), "init_inputs": [4096, 6144],
         "flops": 2 * 16 * 6144 * 4096},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 4096), "init_inputs": [4096, 6144],
         "flops": 2 * 4096 * 6144 * 4096},
    ]
