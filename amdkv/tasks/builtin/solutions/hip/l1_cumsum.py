"""Reference HIP solution for l1_cumsum: row prefix sums: per-thread serial chunks, a block scan of chunk totals in LDS.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
__global__ void cumsum_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float tot[1024];
  const float* row = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  const int chunk = (cols + blockDim.x - 1) / blockDim.x;
  const int lo = threadIdx.x * chunk, hi = min(lo + chunk, cols);
  float s = 0.f;
  for (int c = lo; c < hi; ++c) s += row[c];
  tot[threadIdx.x] = s;
  __syncthreads();
  // Hillis-Steele inclusive scan of the per-thread totals
  for (int off = 1; off < (int)blockDim.x; off <<= 1) {
    float v = threadIdx.x >= off ? tot[threadIdx.x - off] : 0.f;
    __syncthreads();
    tot[threadIdx.x] += v;
    __syncthreads();
  }
  float run = threadIdx.x > 0 ? tot[threadIdx.x - 1] : 0.f;
  for (int c = lo; c < hi; ++c) { run += row[c]; out[c] = run; }
}
torch::Tensor cumsum_fwd(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  hipLaunchKernelGGL(cumsum_rows, dim3((unsigned)rows), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), cols);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_cumsum", cpp_sources=hip_src, functions=['cumsum_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.cumsum_fwd(x)
