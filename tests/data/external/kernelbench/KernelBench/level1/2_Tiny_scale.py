import torch
import torch.nn as nn


class Model(nn.Module):
    """Multiplies by a constant given at construction (amdkv test fixture, KernelBench format)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, x):
        return x * self.factor


def get_inputs():
    return [torch.randn(50)]


def get_init_inputs():
    return [1.5]
