"""Reference HIP solution for rocm_fused_add_layernorm: r = x + residual in fp32; (layernorm(r), r) in fp16.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

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

// h = x + residual (ROUND_H: rounded to the storage type first, as a bf16 add does); LayerNorm of h in fp32.
template <typename T, bool ROUND_H>
__global__ void add_layernorm(const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w,
                              const T* __restrict__ b, T* __restrict__ y, T* __restrict__ h_out, int cols, float eps) {
  __shared__ float scratch[32];
  const int64_t base = (int64_t)blockIdx.x * cols;
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float h = (float)x[base + c] + (float)res[base + c];
    if (ROUND_H) h = (float)(T)h;
    s += h;
  }
  float mean = block_sum(s, scratch) / cols;
  float v = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float h = (float)x[base + c] + (float)res[base + c];
    if (ROUND_H) h = (float)(T)h;
    v += (h - mean) * (h - mean);
  }
  float rstd = rsqrtf(block_sum(v, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float h = (float)x[base + c] + (float)res[base + c];
    if (ROUND_H) h = (float)(T)h;
    y[base + c] = (T)((h - mean) * rstd * (float)w[c] + (float)b[c]);
    h_out[base + c] = (T)h;
  }
}

std::vector<torch::Tensor> add_ln_fwd(torch::Tensor x, torch::Tensor res, torch::Tensor w, torch::Tensor b, double eps) {
  x = x.contiguous();
  res = res.contiguous();
  auto y = torch::empty_like(x);
  auto r = torch::empty_like(x);
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  hipLaunchKernelGGL(HIP_KERNEL_NAME(add_layernorm<__half, false>), dim3((unsigned)rows), dim3(256), 0, 0,
                     reinterpret_cast<const __half*>(x.data_ptr<at::Half>()), reinterpret_cast<const __half*>(res.data_ptr<at::Half>()),
                     reinterpret_cast<const __half*>(w.data_ptr<at::Half>()), reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
                     reinterpret_cast<__half*>(y.data_ptr<at::Half>()), reinterpret_cast<__half*>(r.data_ptr<at::Half>()), cols, (float)eps);
  return {y, r};
}
"""

ext = load_inline(name="amdkv_rocm_fused_add_layernorm", cpp_sources=hip_src, functions=['add_ln_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, hidden_size: int = 4096, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=torch.float16))
        self.bias = nn.Parameter(torch.zeros(hidden_size, dtype=torch.float16))

    def forward(self, x, residual):
        out, r = ext.add_ln_fwd(x, residual, self.weight, self.bias, self.eps)
        return out, r
