"""Row softmax with a warpSize-aware (wave64 on CDNA) shuffle reduction, KernelBench style."""
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

cpp_src = r"""
#include <hip/hip_runtime.h>
#include <cfloat>

__device__ float wave_max(float v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_down(v, off));
  return __shfl(v, 0);
}
__device__ float wave_sum(float v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_down(v, off);
  return __shfl(v, 0);
}

// one row per block; blockDim.x is a multiple of warpSize
__global__ void softmax_rows(const float* x, float* y, int cols) {
  __shared__ float red[1024 / 32];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize, nwaves = blockDim.x / warpSize;
  float m = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = wave_max(m);
  if (lane == 0) red[wave] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < nwaves; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
  s = wave_sum(s);
  if (lane == 0) red[wave] = s;
  __syncthreads();
  s = 0.f;
  for (int w = 0; w < nwaves; ++w) s += red[w];
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) / s;
}

torch::Tensor softmax_hip(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int rows = x.size(0), cols = x.size(1);
  hipLaunchKernelGGL(softmax_rows, dim3(rows), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), cols);
  return y;
}
"""

ext = load_inline(name="softmax_ext", cpp_sources=cpp_src, functions=["softmax_hip"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.softmax_hip(x)
