"""Mixture-of-experts router: gate projection, softmax over experts, top-k, renormalised weights."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "moe",
    "dtypes": ["fp32"],
    # Routing weights are renormalised softmax values, not elements of the input, so the topk
    # comparator (indices judged by the values they select) does not apply; random logits make
    # ties vanishingly rare, so expert ids are compared exactly.
    "comparator": "default",
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, hidden: int, n_experts: int, k: int):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(hidden, n_experts, bias=False)

    def forward(self, x: torch.Tensor):
        probs = torch.softmax(self.gate(x), dim=-1)
        weights, experts = torch.topk(probs, self.k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights, experts


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return [4096, 64, 8]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [128, 8, 2],
         "inputs": lambda: [torch.randn(64, 128)], "flops": 2 * 64 * 128 * 8},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [200, 12, 3],
         "inputs": lambda: [torch.randn(45, 200)], "flops": 2 * 45 * 200 * 12},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096, 64, 8], "inputs": get_inputs,
         "flops": 2 * 8192 * 4096 * 64},
    ]
