"""Reference HIP solution for l1_layernorm: fp32 layer norm, one block per row, two-pass mean/variance.

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

__global__ void layernorm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int cols, float eps) {
  __shared__ float scratch[32];
  const float* row = x + (int64_t)blockIdx.x * cols;
  float* out = y + (int64_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  float mean = block_sum(s, scratch) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = row[c] - mean; v += d * d; }
  float rstd = rsqrtf(block_sum(v, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * w[c] + b[c];
}
torch::Tensor layernorm_fwd(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  hipLaunchKernelGGL(layernorm_rows, dim3((unsigned)rows), dim3(256), 0, 0, x.data_ptr<float>(), w.data_ptr<float>(),
                     b.data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_layernorm", cpp_sources=hip_src, functions=['layernorm_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))

    def forward(self, x):
        return ext.layernorm_fwd(x, self.weight, self.bias, self.eps)
