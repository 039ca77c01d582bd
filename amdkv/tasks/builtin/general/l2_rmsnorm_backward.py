"""RMSNorm backward with respect to the input: grad_x from x, grad_out and the scale (fp32)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "norm",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
        rstd = torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps)
        g = grad_out * self.weight
        return rstd * g - rstd ** 3 * x * (g * x).mean(dim=-1, keepdim=True)


def _mk(*shape):
    return lambda: [torch.randn(*shape) * 1.5, torch.randn(*shape)]


def get_inputs():
    return _mk(8192, 4096)()


def get_init_inputs():
    return [4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [512], "inputs": _mk(64, 512)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [1234], "inputs": _mk(2, 19, 1234)},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096], "inputs": get_inputs},
    ]
