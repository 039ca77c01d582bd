"""Three-layer MLP classifier in fp32: Linear-ReLU, Linear-ReLU, Linear, then log-softmax over classes."""

import torch
import torch.nn as nn
import torch.nn.functional as F

METADATA = {
    "level": 3,
    "op_family": "block",
    "dtypes": ["fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, n_classes: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.head = nn.Linear(d_hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        return torch.log_softmax(self.head(h), dim=-1)


def _flops(b, d_in, d_h, n_cls):
    return 2 * b * (d_in * d_h + d_h * d_h + d_h * n_cls)


def get_inputs():
    return [torch.randn(8192, 2048)]


def get_init_inputs():
    return [2048, 4096, 1000]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "init_inputs": [64, 128, 10],
         "inputs": lambda: [torch.randn(64, 64)], "flops": _flops(64, 64, 128, 10)},
        {"name": "odd", "tags": ["correctness"], "init_inputs": [50, 70, 13],
         "inputs": lambda: [torch.randn(37, 50)], "flops": _flops(37, 50, 70, 13)},
        {"name": "large", "tags": ["performance"], "init_inputs": [2048, 4096, 1000], "inputs": get_inputs,
         "flops": _flops(8192, 2048, 4096, 1000)},
    ]
