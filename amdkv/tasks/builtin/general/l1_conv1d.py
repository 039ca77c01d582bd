"""1-D convolution (stride 1, zero padding) with bias over an NCL fp32 signal."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "conv",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv1d(c_in, c_out, kernel_size, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _flops(n, cin, cout, length, ks, pad):
    return 2 * n * cout * (length + 2 * pad - ks + 1) * cin * ks


def get_inputs():
    return [torch.randn(16, 256, 4096)]


def get_init_inputs():
    return [256, 256, 3, 1]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [16, 32, 3, 1],
         "inputs": lambda: [torch.randn(2, 16, 128)], "flops": _flops(2, 16, 32, 128, 3, 1)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [5, 12, 5, 2],
         "inputs": lambda: [torch.randn(3, 5, 77)], "flops": _flops(3, 5, 12, 77, 5, 2)},
        {"name": "audio", "tags": ["performance"], "init_inputs": [256, 256, 3, 1], "inputs": get_inputs,
         "flops": _flops(16, 256, 256, 4096, 3, 1)},
    ]
