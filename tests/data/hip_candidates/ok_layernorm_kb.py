"""LayerNorm over the last dim (no affine), KernelBench style, block reduction through LDS."""
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

cpp_src = r"""
#include <hip/hip_runtime.h>

__device__ __forceinline__ float block_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(256) layernorm_kernel(const float* x, float* y, int cols, float eps) {
  __shared__ float sh[256];
  const float* row = x + (size_t)blockIdx.x * cols;
  float* out = y + (size_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  float mean = block_sum(s, sh) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = row[c] - mean; v += d * d; }
  float rstd = rsqrtf(block_sum(v, sh) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd;
}

torch::Tensor layernorm_hip(torch::Tensor x, double eps) {
  auto y = torch::empty_like(x);
  int cols = x.size(-1), rows = x.numel() / cols;
  hipLaunchKernelGGL(layernorm_kernel, dim3(rows), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(),
                     cols, (float)eps);
  return y;
}
"""

ext = load_inline(name="ln_ext", cpp_sources=cpp_src, functions=["layernorm_hip"])


class ModelNew(nn.Module):
    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return ext.layernorm_hip(x, self.eps)
