"""Embedding lookup: gather fp16 table rows for a batch of int64 token ids."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "index",
    "dtypes": ["fp16", "int64"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, dim).to(torch.float16))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


def get_inputs():
    return [torch.randint(0, 32000, (16, 2048))]


def get_init_inputs():
    return [32000, 4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [1000, 128],
         "inputs": lambda: [torch.randint(0, 1000, (4, 64))]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [777, 300],
         "inputs": lambda: [torch.randint(0, 777, (3, 37))]},
        {"name": "llm", "tags": ["performance"], "init_inputs": [32000, 4096], "inputs": get_inputs},
    ]
