"""Broken HIP candidate for l1_sum_lastdim: race: reads partial sums before other warps wrote them."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

src = r"""
#include <hip/hip_runtime.h>
__global__ void k(const float* x, float* y, int cols) {
  __shared__ float s[256];
  const float* row = x + (size_t)blockIdx.x * cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) v += row[c];
  s[threadIdx.x] = v;
  // missing __syncthreads() between the tree steps: a data race across warps
  for (int o = 128; o > 0; o >>= 1) { if (threadIdx.x < o) s[threadIdx.x] += s[threadIdx.x + o]; }
  if (threadIdx.x == 0) y[blockIdx.x] = s[0];
}
torch::Tensor f(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty({x.size(0)}, x.options());
  hipLaunchKernelGGL(k, dim3(x.size(0)), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), (int)x.size(1));
  return y;
}
"""

ext = load_inline(name="hb_race_sum_no_sync", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.f(x)
