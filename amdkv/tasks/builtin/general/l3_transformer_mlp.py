"""Transformer SwiGLU MLP block in fp16: down_proj(silu(gate_proj(x)) * up_proj(x))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "block",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False, dtype=torch.float16)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False, dtype=torch.float16)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False, dtype=torch.float16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _flops(tokens, hidden, inter):
    return 2 * tokens * hidden * inter * 3


def get_inputs():
    return [torch.randn(2, 2048, 4096, dtype=torch.float16)]


def get_init_inputs():
    return [4096, 11008]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [128, 256],
         "inputs": lambda: [torch.randn(2, 64, 128, dtype=torch.float16)], "flops": _flops(128, 128, 256)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [96, 200],
         "inputs": lambda: [torch.randn(1, 75, 96, dtype=torch.float16)], "flops": _flops(75, 96, 200)},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096, 11008], "inputs": get_inputs,
         "flops": _flops(4096, 4096, 11008)},
    ]
