"""Compile error: type error (assigning a pointer to a float)."""
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

cpp_src = r"""
#include <hip/hip_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x;
}

torch::Tensor relu_hip(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  hipLaunchKernelGGL(relu_kernel, dim3(blocks), dim3(threads), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""

relu_ext = load_inline(name="relu_ext", cpp_sources=cpp_src, functions=["relu_hip"], verbose=False,
                       extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ext.relu_hip(x)
