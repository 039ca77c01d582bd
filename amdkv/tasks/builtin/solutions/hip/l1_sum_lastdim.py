"""Reference HIP solution for l1_sum_lastdim: row sums, one block per row.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
// Wavefront-size-aware reductions: warpSize is 64 on CDNA and 32 on NVIDIA/RDNA.
__device__ __forceinline__ float wave_sum(float v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v += __shfl_xor(v, off);
  return v;
}
__device__ __forceinline__ float wave_max(float v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor(v, off));
  return v;
}
// Whole-block reductions (blockDim.x a multiple of warpSize, at most 1024 threads); `scratch`
// holds one float per wave. Every thread gets the result.
__device__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize;
  const int nwaves = blockDim.x / warpSize;
  v = wave_sum(v);
  if (lane == 0) scratch[wave] = v;
  __syncthreads();
  float t = 0.f;
  for (int w = 0; w < nwaves; ++w) t += scratch[w];
  __syncthreads();
  return t;
}
__device__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize;
  const int nwaves = blockDim.x / warpSize;
  v = wave_max(v);
  if (lane == 0) scratch[wave] = v;
  __syncthreads();
  float t = scratch[0];
  for (int w = 1; w < nwaves; ++w) t = fmaxf(t, scratch[w]);
  __syncthreads();
  return t;
}

__global__ void row_sum(const float* __restrict__ x, float* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const float* row = x + (int64_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) y[blockIdx.x] = s;
}
torch::Tensor sum_fwd(torch::Tensor x) {
  x = x.contiguous();
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto y = torch::empty(sizes, x.options());
  hipLaunchKernelGGL(row_sum, dim3((unsigned)rows), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), cols);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_sum_lastdim", cpp_sources=hip_src, functions=['sum_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.sum_fwd(x)
