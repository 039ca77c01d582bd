"""A candidate that lets PyTorch do the work (KernelBench's rule accepts it; amdkv-strict does not)."""
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
