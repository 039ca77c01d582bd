"""Broken HIP candidate for l1_sum_lastdim: wave64_dependent."""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

src = r"""
#include <hip/hip_runtime.h>
__global__ void k(const float* x, float* y, int cols) {
  __shared__ float red[32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  for (int off = 32; off > 0; off >>= 1) s += __shfl_down(s, off);
  if (threadIdx.x % 64 == 0) red[threadIdx.x / 64] = s;
  __syncthreads();
  if (threadIdx.x == 0) { float t = 0.f; for (int w = 0; w < (int)blockDim.x / 64; ++w) t += red[w]; y[blockIdx.x] = t; }
}
torch::Tensor f(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty({x.size(0)}, x.options());
  hipLaunchKernelGGL(k, dim3(x.size(0)), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), (int)x.size(1));
  return y;
}
"""

ext = load_inline(name="hb_wave64_sum_tree32", cpp_sources=src, functions=["f"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.f(x)
