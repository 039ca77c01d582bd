"""Compile error: bad template (a non-type template argument that is not a constant expression)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <hip/hip_runtime.h>

template <typename T, int VEC>
__global__ void scale_kernel(const T* x, T* y, T s, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  for (int v = 0; v < VEC; ++v) if (i + v < n) y[i + v] = x[i + v] * s;
}

torch::Tensor scale(torch::Tensor x, double s) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  int vec = n % 4 == 0 ? 4 : 1;
  scale_kernel<float, vec><<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
  return y;
}
"""

ext = load_inline(name="scale_ext", cpp_sources="torch::Tensor scale(torch::Tensor x, double s);",
                  cuda_sources=cuda_src, functions=["scale"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale(x, 2.0)
