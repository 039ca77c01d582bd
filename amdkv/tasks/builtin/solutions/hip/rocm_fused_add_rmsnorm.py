"""Reference HIP solution for rocm_fused_add_rmsnorm: r = x + residual in fp32; (rmsnorm(r) * w, r) in fp16, one block per row.

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
#include <ATen/hip/HIPContext.h>
__global__ void add_rmsnorm(const __half* __restrict__ x, const __half* __restrict__ res, const __half* __restrict__ w,
                            __half* __restrict__ y, __half* __restrict__ r_out, int cols, float eps) {
  __shared__ float scratch[32];
  const int64_t base = (int64_t)blockIdx.x * cols;
  float ss = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float r = __half2float(x[base + c]) + __half2float(res[base + c]);
    ss += r * r;
  }
  float rstd = rsqrtf(block_sum(ss, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float r = __half2float(x[base + c]) + __half2float(res[base + c]);
    y[base + c] = __float2half(r * rstd * __half2float(w[c]));
    r_out[base + c] = __float2half(r);
  }
}
std::vector<torch::Tensor> add_rmsnorm_fwd(torch::Tensor x, torch::Tensor res, torch::Tensor w, double eps) {
  x = x.contiguous();
  res = res.contiguous();
  auto y = torch::empty_like(x);
  auto r = torch::empty_like(x);
  int cols = (int)x.size(-1);
  int64_t rows = x.numel() / cols;
  add_rmsnorm<<<(unsigned)rows, 256, 0, at::hip::getCurrentHIPStream()>>>(
      reinterpret_cast<const __half*>(x.data_ptr<at::Half>()), reinterpret_cast<const __half*>(res.data_ptr<at::Half>()),
      reinterpret_cast<const __half*>(w.data_ptr<at::Half>()), reinterpret_cast<__half*>(y.data_ptr<at::Half>()),
      reinterpret_cast<__half*>(r.data_ptr<at::Half>()), cols, (float)eps);
  return {y, r};
}
"""

decls = r"""
std::vector<torch::Tensor> add_rmsnorm_fwd(torch::Tensor x, torch::Tensor res, torch::Tensor w, double eps);
"""

ext = load_inline(name="amdkv_rocm_fused_add_rmsnorm", cpp_sources=decls, cuda_sources=hip_src, functions=['add_rmsnorm_fwd'],
                  extra_cuda_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, hidden_size: int = 4096, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size, dtype=torch.float16))

    def forward(self, x, residual):
        out, r = ext.add_rmsnorm_fwd(x, residual, self.weight, self.eps)
        return out, r
