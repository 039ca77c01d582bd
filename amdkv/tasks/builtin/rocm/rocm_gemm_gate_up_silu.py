"""Llama-3-8B MLP gate/up projection fused with SiLU-and-mul: silu(x Wg^T) * (x Wu^T), fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """weight holds the gate rows [0, I) followed by the up rows [I, 2I), as in a merged gate_up_proj."""

    def __init__(self, hidden_size: int = 4096, intermediate_size: int = 14336):
        super().__init__()
        w = torch.randn(2 * intermediate_size, hidden_size) * hidden_size ** -0.5
        self.weight = nn.Parameter(w.to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.linear(x, self.weight)
        gate, up = h.chunk(2, dim=-1)
        return F.silu(gate) * up


def _x(m, k):
    return lambda: [torch.randn(m, k).to(torch.float16)]


def get_inputs():
    return _x(4096, 4096)()


def get_init_inputs():
    return [4096, 14336]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _x(16, 128), "init_inputs": [128, 64]},
        {"name": "odd", "tags": ["correctness"], "inputs": _x(45, 96), "init_inputs": [96, 100]},
        {"name": "decode_m8", "tags": ["performance"], "inputs": _x(8, 4096), "init_inputs": [4096, 14336],
         "flops": 2 * 8 * 2 * 14336 * 4096},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 4096), "init_inputs": [4096, 14336],
         "flops": 2 * 4096 * 2 * 14336 * 4096},
    ]
