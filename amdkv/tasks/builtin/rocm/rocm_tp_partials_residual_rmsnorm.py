"""Tensor-parallel reduction without all-reduce: sum per-rank partial outputs, add residual, RMSNorm, fp16."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "norm",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """partials: [TP, T, H] (row-parallel linear outputs of TP ranks); residual: [T, H].
    s = sum_r partials[r] + residual (fp32); returns (rmsnorm(s) * weight, s), both in the input dtype.
    """

    def __init__(self, hidden_size: int = 8192, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, partials: torch.Tensor, residual: torch.Tensor):
        s = partials.float().sum(dim=0) + residual.float()
        var = s.pow(2).mean(dim=-1, keepdim=True)
        out = s * torch.rsqrt(var + self.eps) * self.weight.float()
        return out.to(residual.dtype), s.to(residual.dtype)


def _inputs(tp, t, h):
    return lambda: [torch.randn(tp, t, h).to(torch.float16), torch.randn(t, h).to(torch.float16)]


def get_inputs():
    return _inputs(8, 2048, 8192)()


def get_init_inputs():
    return [8192, 1e-5]


def get_cases():
    return [
        {"name": "odd_tp3", "tags": ["correctness"], "inputs": _inputs(3, 6, 1000), "init_inputs": [1000, 1e-5]},
        {"name": "small_tp4", "tags": ["correctness"], "inputs": _inputs(4, 16, 512), "init_inputs": [512, 1e-5]},
        {"name": "prefill_tp8_2048", "tags": ["performance"], "inputs": _inputs(8, 2048, 8192),
         "init_inputs": [8192, 1e-5]},
        {"name": "decode_tp4_64", "tags": ["performance"], "inputs": _inputs(4, 64, 8192),
         "init_inputs": [8192, 1e-5]},
    ]
