"""Cheat: carries a copy of the reference Model and calls it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr):
    pass


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ref = Model()

    def forward(self, x):
        _noop[(1,)](x)
        return self.ref(x)
