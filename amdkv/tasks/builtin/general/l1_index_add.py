"""Scatter-add of fp32 rows into a zero table by int64 row index (the shape of an embedding backward)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "index",
    "dtypes": ["fp32", "int64"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, num_rows: int):
        super().__init__()
        self.num_rows = num_rows

    def forward(self, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(self.num_rows, src.shape[1], dtype=src.dtype, device=src.device)
        return out.index_add(0, index, src)


def get_inputs():
    return [torch.randint(0, 32000, (16384,)), torch.randn(16384, 4096)]


def get_init_inputs():
    return [32000]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [50],
         "inputs": lambda: [torch.randint(0, 50, (256,)), torch.randn(256, 64)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [13],
         "inputs": lambda: [torch.randint(0, 13, (301,)), torch.randn(301, 100)]},
        {"name": "embedding_grad", "tags": ["performance"], "init_inputs": [32000], "inputs": get_inputs},
    ]
