import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(a + b) (amdkv test fixture, KernelBench format)."""

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(40), torch.randn(40)]


def get_init_inputs():
    return []
