"""LayerNorm backward: from x and grad_out compute grad_x, grad_weight and grad_bias (fp32)."""

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
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor, grad_out: torch.Tensor):
        mean = x.mean(dim=-1, keepdim=True)
        xc = x - mean
        rstd = torch.rsqrt((xc * xc).mean(dim=-1, keepdim=True) + self.eps)
        xhat = xc * rstd
        g = grad_out * self.weight
        grad_x = rstd * (g - g.mean(dim=-1, keepdim=True) - xhat * (g * xhat).mean(dim=-1, keepdim=True))
        grad_w = (grad_out * xhat).sum(dim=0)
        grad_b = grad_out.sum(dim=0)
        return grad_x, grad_w, grad_b


def _mk(m, n):
    return lambda: [torch.randn(m, n) * 2 + 0.5, torch.randn(m, n)]


def get_inputs():
    return _mk(8192, 4096)()


def get_init_inputs():
    return [4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [256], "inputs": _mk(128, 256)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [1000], "inputs": _mk(77, 1000)},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096], "inputs": get_inputs},
    ]
