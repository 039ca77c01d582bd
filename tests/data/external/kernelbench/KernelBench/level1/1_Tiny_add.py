import torch
import torch.nn as nn


class Model(nn.Module):
    """Adds two tensors (amdkv test fixture in KernelBench's problem format)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(3, 37), torch.randn(3, 37)]


def get_init_inputs():
    return []
