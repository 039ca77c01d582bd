"""Reference HIP solution for l1_max_lastdim: fp16 row max, one block per row.

`cuda_sources` style: kernels and launchers in `cuda_sources`, declarations in `cpp_sources`.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

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

#include <hip/hip_fp16.h>
__global__ void row_max(const __half* __restrict__ x, __half* __restrict__ y, int cols) {
  __shared__ float scratch[32];
  const __half* row = x + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, __half2float(row[c]));
  m = block_max(m, scratch);
  if (threadIdx.x == 0) y[blockIdx.x] = __float2half(m);
}
torch::Tensor max_fwd(torch::Tensor x) {
  x = x.contiguous();
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto y = torch::empty(sizes, x.options());
  row_max<<<(unsigned)rows, 256>>>(reinterpret_cast<const __half*>(x.data_ptr<at::Half>()),
                                   reinterpret_cast<__half*>(y.data_ptr<at::Half>()), cols);
  return y;
}
"""

decls = r"""
torch::Tensor max_fwd(torch::Tensor x);
"""

ext = load_inline(name="amdkv_l1_max_lastdim", cpp_sources=decls, cuda_sources=hip_src, functions=['max_fwd'],
                  extra_cuda_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.max_fwd(x)
