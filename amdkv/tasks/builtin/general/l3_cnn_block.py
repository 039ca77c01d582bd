"""Small CNN stage in fp32: two 3x3 conv + ReLU layers followed by 2x2 max pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "conv",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, c_in: int, c_mid: int, c_out: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_mid, 3, padding=1)
        self.conv2 = nn.Conv2d(c_mid, c_out, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv1(x))
        h = torch.relu(self.conv2(h))
        return F.max_pool2d(h, 2)


def _flops(n, cin, cmid, cout, h, w):
    return 2 * n * h * w * 9 * (cin * cmid + cmid * cout)


def get_inputs():
    return [torch.randn(32, 64, 112, 112)]


def get_init_inputs():
    return [64, 128, 128]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [4, 16, 16],
         "inputs": lambda: [torch.randn(1, 4, 12, 12)], "flops": _flops(1, 4, 16, 16, 12, 12)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [3, 8, 12],
         "inputs": lambda: [torch.randn(1, 3, 11, 9)], "flops": _flops(1, 3, 8, 12, 11, 9)},
        {"name": "vgg_stage", "tags": ["performance"], "init_inputs": [64, 128, 128], "inputs": get_inputs,
         "flops": _flops(32, 64, 128, 128, 112, 112)},
    ]
