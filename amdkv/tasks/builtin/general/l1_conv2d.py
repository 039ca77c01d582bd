"""2-D convolution with bias, stride and zero padding over an NCHW fp32 feature map."""

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
    def __init__(self, c_in: int, c_out: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _flops(n, cin, cout, h, w, k, s, p):
    oh = (h + 2 * p - k) // s + 1
    ow = (w + 2 * p - k) // s + 1
    return 2 * n * cout * oh * ow * cin * k * k


def get_inputs():
    return [torch.randn(32, 128, 56, 56)]


def get_init_inputs():
    return [128, 128, 3, 1, 1]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [8, 16, 3, 1, 1],
         "inputs": lambda: [torch.randn(2, 8, 16, 16)], "flops": _flops(2, 8, 16, 16, 16, 3, 1, 1)},
        {"name": "odd_strided", "tags": ["correctness"], "init_inputs": [5, 7, 3, 2, 1],
         "inputs": lambda: [torch.randn(1, 5, 13, 11)], "flops": _flops(1, 5, 7, 13, 11, 3, 2, 1)},
        {"name": "resnet_block", "tags": ["performance"], "init_inputs": [128, 128, 3, 1, 1], "inputs": get_inputs,
         "flops": _flops(32, 128, 128, 56, 56, 3, 1, 1)},
    ]
