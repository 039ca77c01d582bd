"""Broken HIP candidate for l1_relu: value_mismatch."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

src = r"""
#include <hip/hip_runtime.h>
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.01f * x[i];
}
torch::Tensor f(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int n = x.numel();
  hipLaunchKernelGGL(k, dim3((n + 255) / 256), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

ext = load_inline(name="hb_wrong_relu_leaky", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.f(x)
