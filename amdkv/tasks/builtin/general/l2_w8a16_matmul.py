"""Weight-only int8 linear layer: fp16 activations times per-output-channel dequantised int8 weights."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["fp16", "int8"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.register_buffer("wq", torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8))
        self.register_buffer("scale", torch.rand(out_features) * 0.004 + 0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = (self.wq.to(torch.float32) * self.scale[:, None]).to(x.dtype)
        return x @ w.t()


def get_inputs():
    return [torch.randn(8192, 4096, dtype=torch.float16)]


def get_init_inputs():
    return [4096, 4096]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [128, 256],
         "inputs": lambda: [torch.randn(64, 128, dtype=torch.float16)], "flops": 2 * 64 * 128 * 256},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [200, 77],
         "inputs": lambda: [torch.randn(45, 200, dtype=torch.float16)], "flops": 2 * 45 * 200 * 77},
        {"name": "llm", "tags": ["performance"], "init_inputs": [4096, 4096], "inputs": get_inputs,
         "flops": 2 * 8192 * 4096 * 4096},
    ]
