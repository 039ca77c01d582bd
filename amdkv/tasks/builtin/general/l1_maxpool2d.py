"""2-D max pooling (3x3 window, stride 2, padding 1) over an NCHW fp32 feature map."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 1,
    "op_family": "pooling",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)


def get_inputs():
    return [torch.randn(32, 128, 112, 112)]


def get_init_inputs():
    return [3, 2, 1]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": lambda: [torch.randn(2, 8, 32, 32)]},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [2, 2, 0], "inputs": lambda: [torch.randn(3, 5, 17, 23)]},
        {"name": "stem", "tags": ["performance"], "inputs": get_inputs},
    ]
