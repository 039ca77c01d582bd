"""Small pre-norm transformer block in fp32: RMSNorm, causal multi-head attention, residual, RMSNorm, GELU MLP, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "block",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, n_heads: int, intermediate: int, eps: float = 1e-6):
        super().__init__()
        self.n_heads = n_heads
        self.eps = eps
        self.norm1 = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.proj = nn.Linear(hidden, hidden)
        self.norm2 = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.fc1 = nn.Linear(hidden, intermediate)
        self.fc2 = nn.Linear(intermediate, hidden)

    def _attn(self, h):
        B, S, Hd = h.shape
        hd = Hd // self.n_heads
        q, k, v = self.qkv(h).view(B, S, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        future = torch.ones(S, S, dtype=torch.bool, device=scores.device).triu(1)
        probs = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return self.proj((probs @ v).transpose(1, 2).reshape(B, S, Hd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        Hd = x.shape[-1]
        x = x + self._attn(F.rms_norm(x, (Hd,), self.norm1, self.eps))
        return x + self.fc2(F.gelu(self.fc1(F.rms_norm(x, (Hd,), self.norm2, self.eps))))


def _flops(b, s, hd, inter):
    t = b * s
    return 2 * t * hd * 4 * hd + 2 * b * s * s * hd + 2 * t * hd * inter * 2


def get_inputs():
    return [torch.randn(2, 1024, 1024)]


def get_init_inputs():
    return [1024, 16, 4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [64, 4, 128],
         "inputs": lambda: [torch.randn(2, 32, 64)], "flops": _flops(2, 32, 64, 128)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [64, 2, 96],
         "inputs": lambda: [torch.randn(1, 45, 64)], "flops": _flops(1, 45, 64, 96)},
        {"name": "medium", "tags": ["performance"], "init_inputs": [1024, 16, 4096], "inputs": get_inputs,
         "flops": _flops(2, 1024, 1024, 4096)},
    ]
