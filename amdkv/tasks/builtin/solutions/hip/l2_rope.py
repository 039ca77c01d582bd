"""Reference HIP solution for l2_rope: rotary embedding on bf16 [B, H, S, D] with fp32 cos/sin tables.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_bf16.h>
__global__ void rope_bf16(const __hip_bfloat16* __restrict__ x, const float* __restrict__ cosv, const float* __restrict__ sinv,
                          __hip_bfloat16* __restrict__ y, int64_t total_pairs, int seq, int half) {
  int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= total_pairs) return;
  int64_t vec = p / half;            // which (b, h, s) vector
  int j = (int)(p % half);
  int s = (int)(vec % seq);
  const __hip_bfloat16* v = x + vec * 2 * half;
  float x1 = __bfloat162float(v[j]), x2 = __bfloat162float(v[j + half]);
  float c = cosv[(int64_t)s * half + j], sn = sinv[(int64_t)s * half + j];
  y[vec * 2 * half + j] = __float2bfloat16(x1 * c - x2 * sn);
  y[vec * 2 * half + j + half] = __float2bfloat16(x2 * c + x1 * sn);
}
torch::Tensor rope_fwd(torch::Tensor x, torch::Tensor cosv, torch::Tensor sinv) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int seq = (int)x.size(2), half = (int)(x.size(3) / 2);
  int64_t pairs = x.numel() / 2;
  hipLaunchKernelGGL(rope_bf16, dim3((unsigned)((pairs + 255) / 256)), dim3(256), 0, 0,
                     reinterpret_cast<const __hip_bfloat16*>(x.data_ptr<at::BFloat16>()), cosv.data_ptr<float>(),
                     sinv.data_ptr<float>(), reinterpret_cast<__hip_bfloat16*>(y.data_ptr<at::BFloat16>()), pairs, seq, half);
  return y;
}
"""

ext = load_inline(name="amdkv_l2_rope", cpp_sources=hip_src, functions=['rope_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self, head_dim: int, max_seq: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.arange(max_seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", torch.cos(angles).float())
        self.register_buffer("sin", torch.sin(angles).float())

    def forward(self, x):
        return ext.rope_fwd(x, self.cos, self.sin)
