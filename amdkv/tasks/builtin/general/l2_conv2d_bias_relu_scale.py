"""Conv2d, then ReLU, then a learned per-channel scale (fused conv epilogue), fp32."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 2,
    "op_family": "conv",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size, padding=padding)
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(c_out, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) * self.scale


def _flops(n, cin, cout, h, w, k, p):
    return 2 * n * cout * (h + 2 * p - k + 1) * (w + 2 * p - k + 1) * cin * k * k


def get_inputs():
    return [torch.randn(16, 64, 128, 128)]


def get_init_inputs():
    return [64, 128, 3, 1]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [16, 32, 3, 1],
         "inputs": lambda: [torch.randn(2, 16, 12, 12)], "flops": _flops(2, 16, 32, 12, 12, 3, 1)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [3, 10, 5, 2],
         "inputs": lambda: [torch.randn(2, 3, 15, 17)], "flops": _flops(2, 3, 10, 15, 17, 5, 2)},
        {"name": "large", "tags": ["performance"], "init_inputs": [64, 128, 3, 1], "inputs": get_inputs,
         "flops": _flops(16, 64, 128, 128, 128, 3, 1)},
    ]
