"""Causal scaled-dot-product attention written out (scores, causal mask, softmax, weighted sum) on fp16 heads."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "attention",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq, dim = q.shape[-2], q.shape[-1]
        scores = (q @ k.transpose(-2, -1)) * (1.0 / dim ** 0.5)
        future = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v


def _mk(b, h, s, d):
    return lambda: [torch.randn(b, h, s, d, dtype=torch.float16) for _ in range(3)]


def _flops(b, h, s, d):
    return 2 * 2 * b * h * s * s * d // 2  # two matmuls, half the square is masked


def get_inputs():
    return _mk(4, 32, 4096, 128)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _mk(1, 2, 128, 64), "flops": _flops(1, 2, 128, 64)},
        {"name": "odd", "tags": ["correctness"], "inputs": _mk(2, 3, 77, 32), "flops": _flops(2, 3, 77, 32)},
        {"name": "llm", "tags": ["performance"], "inputs": get_inputs, "flops": _flops(4, 32, 4096, 128)},
    ]
