"""Broken HIP candidate for l1_relu: torch_compute_in_forward (aten clamp_min issued by the extension's C++)."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

src = r"""
#include <hip/hip_runtime.h>
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
torch::Tensor f(torch::Tensor x) {
  x = x.contiguous();
  auto y = x.clamp_min(0);
  int n = x.numel();
  (void)n;
  return y;
}
"""

ext = load_inline(name="hb_no_launch_returns_input_copy", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.f(x)
