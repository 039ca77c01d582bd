"""Reference HIP solution for l1_gelu_tanh: fp16 tanh-approximated GELU computed in fp32.

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
__global__ void gelu_tanh_f16(const __half* __restrict__ x, __half* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = __half2float(x[i]);
    float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y[i] = __float2half(0.5f * v * (1.f + tanhf(inner)));
  }
}
torch::Tensor gelu_fwd(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  hipLaunchKernelGGL(gelu_tanh_f16, dim3((unsigned)((n + 255) / 256)), dim3(256), 0, 0,
                     reinterpret_cast<const __half*>(x.data_ptr<at::Half>()), reinterpret_cast<__half*>(y.data_ptr<at::Half>()), n);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_gelu_tanh", cpp_sources=hip_src, functions=['gelu_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.gelu_fwd(x)
