"""Fused residual add + RMSNorm (vLLM-style fused_add_rms_norm) returning the output and the new residual, fp16."""

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
    """r = x + residual (fp32); returns (rmsnorm(r) * weight, r), both in the input dtype."""

    def __init__(self, hidden_size: int = 4096, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden_size)).to(torch.float16))

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        r = x.float() + residual.float()
        var = r.pow(2).mean(dim=-1, keepdim=True)
        out = r * torch.rsqrt(var + self.eps) * self.weight.float()
        return out.to(x.dtype), r.to(x.dtype)


def _inputs(t, h):
    return lambda: [torch.randn(t, h).to(torch.float16), torch.randn(t, h).to(torch.float16)]


def get_inputs():
    return _inputs(4096, 4096)()


def get_init_inputs():
    return [4096, 1e-6]


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(5, 1000), "init_inputs": [1000, 1e-6]},
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(16, 512), "init_inputs": [512, 1e-6]},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _inputs(4096, 4096), "init_inputs": [4096, 1e-6]},
        {"name": "decode_64_h8192", "tags": ["performance"], "inputs": _inputs(64, 8192), "init_inputs": [8192, 1e-5]},
    ]
