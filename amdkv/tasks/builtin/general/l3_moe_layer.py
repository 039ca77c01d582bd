"""Mixture-of-experts layer in fp32: softmax top-k router with renormalised weights and SwiGLU expert MLPs."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "moe",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, intermediate: int, n_experts: int, k: int):
        super().__init__()
        self.k = k
        self.n_experts = n_experts
        self.gate = nn.Linear(hidden, n_experts, bias=False)
        self.w_gate = nn.Parameter(torch.randn(n_experts, intermediate, hidden) / hidden ** 0.5)
        self.w_up = nn.Parameter(torch.randn(n_experts, intermediate, hidden) / hidden ** 0.5)
        self.w_down = nn.Parameter(torch.randn(n_experts, hidden, intermediate) / intermediate ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(self.gate(x), dim=-1)
        weights, experts = torch.topk(probs, self.k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(self.n_experts):
            tok, slot = torch.where(experts == e)
            if tok.numel() == 0:
                continue
            xe = x[tok]
            h = F.silu(xe @ self.w_gate[e].t()) * (xe @ self.w_up[e].t())
            out.index_add_(0, tok, (h @ self.w_down[e].t()) * weights[tok, slot, None])
        return out


def _flops(t, hidden, inter, k):
    return 2 * t * k * hidden * inter * 3


def get_inputs():
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return [2048, 4096, 8, 2]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [64, 128, 4, 2],
         "inputs": lambda: [torch.randn(64, 64)], "flops": _flops(64, 64, 128, 2)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [48, 80, 6, 2],
         "inputs": lambda: [torch.randn(37, 48)], "flops": _flops(37, 48, 80, 2)},
        {"name": "mixtral_like", "tags": ["performance"], "init_inputs": [2048, 4096, 8, 2], "inputs": get_inputs,
         "flops": _flops(4096, 2048, 4096, 2)},
    ]
