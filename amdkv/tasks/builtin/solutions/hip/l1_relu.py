"""Reference HIP solution for l1_relu: grid-stride ReLU, four floats per thread when aligned.

KernelBench HIP style: kernels and the torch binding in `cpp_sources`, built with CXX=hipcc.
"""
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

os.environ["CXX"] = "hipcc"

hip_src = r"""
#include <hip/hip_runtime.h>
__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
    float4 v = x[i];
    y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
  }
}
__global__ void relu_tail(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
  int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor relu_fwd(torch::Tensor x) {
  x = x.contiguous();
  auto y = torch::empty_like(x);
  int64_t n = x.numel(), n4 = n / 4;
  if (n4 > 0) {
    int blocks = (int)std::min<int64_t>((n4 + 255) / 256, 65535);
    hipLaunchKernelGGL(relu_vec4, dim3(blocks), dim3(256), 0, 0,
                       reinterpret_cast<const float4*>(x.data_ptr<float>()), reinterpret_cast<float4*>(y.data_ptr<float>()), n4);
  }
  int64_t rest = n - n4 * 4;
  if (rest > 0)
    hipLaunchKernelGGL(relu_tail, dim3(1), dim3(256), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
  return y;
}
"""

ext = load_inline(name="amdkv_l1_relu", cpp_sources=hip_src, functions=['relu_fwd'],
                  extra_cflags=['-O3'], verbose=False)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_fwd(x)
