"""A cheating l1_gather candidate: it calls PyTorch instead of writing a kernel."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, index):
        return torch.gather(x, 1, index)
