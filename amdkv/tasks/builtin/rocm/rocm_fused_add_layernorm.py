"""Fused residual add + LayerNorm (weight and bias) returning the output and the new residual, fp16."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "norm",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """r = x + residual (fp32); returns (layer_norm(r) * weight + bias, r), both in the input dtype."""

    def __init__(self, hidden_size: int = 4096, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        r = x.float() + residual.float()
        out = F.layer_norm(r, (r.shape[-1],), self.weight.float(), self.bias.float(), self.eps)
        return out.to(x.dtype), r.to(x.dtype)


def _inputs(t, h):
    return lambda: [(torch.randn(t, h) + 0.5).to(torch.float16), torch.randn(t, h).to(torch.float16)]


def get_inputs():
    return _inputs(4096, 4096)()


def get_init_inputs():
    return [4096, 1e-5]


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(7, 1000), "init_inputs": [1000, 1e-5]},
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(16, 768), "init_inputs": [768, 1e-5]},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _inputs(4096, 4096), "init_inputs": [4096, 1e-5]},
        {"name": "decode_64_h5120", "tags": ["performance"], "inputs": _inputs(64, 5120), "init_inputs": [5120, 1e-5]},
    ]
