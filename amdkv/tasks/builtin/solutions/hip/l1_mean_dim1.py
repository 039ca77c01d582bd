"""Reference HIP solution for l1_mean_dim1: mean over dim 1 of [B, N, D]: one thread per (b, d), coalesced along d.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
__global__ void mean_dim1(const float* __restrict__ x, float* __restrict__ y, int n, int d) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= d) return;
  const float* base = x + (int64_t)blockIdx.y * n * d + col;
  float s = 0.f;
  for (int i = 0; i < n; ++i) s += base[(int64_t)i * d];
  y[(int64_t)blockIdx.y * d + col] = s / n;
}
torch::Tensor mean_fwd(torch::Tensor x) {
  x = x.contiguous();
  int b = (int)x.size(0), n = (int)x.size(1), d = (int)x.size(2);
  auto y = torch::empty({b, d}, x.options());
  hipLaunchKernelGGL(mean_dim1, dim3((d + 127) / 128, b), dim3(128), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n, d);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_mean_dim1", cpp_sources=hip_src, functions=['mean_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.mean_fwd(x)
