"""Reference HIP solution for l2_cross_entropy: mean cross-entropy: per-row logsumexp in a block, one atomic add per row.

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

__global__ void ce_rows(const float* __restrict__ x, const int64_t* __restrict__ target, float* __restrict__ out,
                        int cols, float inv_rows) {
  __shared__ float scratch[32];
  const float* row = x + (int64_t)blockIdx.x * cols;
  float m = -INFINITY;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
  m = block_max(m, scratch);
  float s = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(row[c] - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) atomicAdd(out, (m + logf(s) - row[target[blockIdx.x]]) * inv_rows);
}
torch::Tensor ce_fwd(torch::Tensor x, torch::Tensor target) {
  x = x.contiguous();
  target = target.contiguous();
  auto out = torch::zeros({}, x.options());
  int rows = (int)x.size(0), cols = (int)x.size(1);
  ce_rows<<<rows, 256>>>(x.data_ptr<float>(), target.data_ptr<int64_t>(), out.data_ptr<float>(), cols, 1.f / rows);
  return out;
}
"""

decls = r"""
torch::Tensor ce_fwd(torch::Tensor x, torch::Tensor target);
"""

ext = load_inline(name="amdkv_l2_cross_entropy", cpp_sources=decls, cuda_sources=hip_src, functions=['ce_fwd'],
                  extra_cuda_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, target):
        return ext.ce_fwd(logits, target)
