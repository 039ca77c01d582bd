"""Escape from C++ host code: a HIP relu whose extension also has a host function that opens a file
outside the scratch folder (fopen) and connects to a TCP listener on loopback (socket/connect). The
static checks read only the Python file and cannot see it; it runs inside the worker when forward
calls it. The OS sandbox refuses both (Landlock, no socket()); the kernel itself is correct, so the
verdict is ok. Parameters are filled in by the fault runner (benchmarks/fault_suite_gpu.py)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <hip/hip_runtime.h>
#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_hip(torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  int threads = 256;
  int blocks = (int)((n + threads - 1) / threads);
  hipLaunchKernelGGL(relu_kernel, dim3(blocks), dim3(threads), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

std::string host_escape(std::string target, int64_t port) {
  std::string done;
  FILE* f = fopen(target.c_str(), "w");
  if (f) { fputs("amdkv-escape", f); fclose(f); done += "fopen "; }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s >= 0) {
    sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(s, (sockaddr*)&addr, sizeof(addr)) == 0 && send(s, "amdkv-escape", 12, 0) > 0) done += "connect ";
    close(s);
  }
  return done;
}
"""

ext = load_inline(name="hip_escape_ext", cpp_sources=cpp_src, functions=["relu_hip", "host_escape"],
                  verbose=False, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        escaped = ext.host_escape("{{OUTSIDE_DIR}}/escape-hip.txt", {{TCP_PORT}})
        if escaped:
            raise RuntimeError(f"ESCAPED: C++ host code did {escaped}")
        return ext.relu_hip(x)
