"""Cheat: no Triton kernel at all; the result comes from Python operators."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * (x > 0)
