"""W8A8 int8 GEMM with per-token activation scales and per-channel weight scales, fp16 out."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["int8", "fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """a: int8 [M, K], a_scale: fp32 [M, 1]; b: int8 [N, K], b_scale: fp32 [N].
    out = (a @ b^T) * a_scale * b_scale, returned in fp16 (the eager reference sums in fp32, exact for K < 1024).
    """

    def __init__(self):
        super().__init__()

    def forward(self, a, a_scale, b, b_scale):
        acc = a.to(a_scale.dtype) @ b.to(a_scale.dtype).t()
        return (acc * a_scale * b_scale[None, :]).to(torch.float16)


def _inputs(m, n, k):
    def make():
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
        b = torch.randint(-128, 128, (n, k), dtype=torch.int8)
        a_scale = (torch.rand(m, 1) * 0.02 + 0.005) / k ** 0.5
        b_scale = torch.rand(n) * 0.02 + 0.005
        return [a, a_scale, b, b_scale]
    return make


def get_inputs():
    return _inputs(4096, 4096, 4096)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(33, 96, 160)},
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(64, 128, 256)},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _inputs(4096, 4096, 4096),
         "flops": 2 * 4096 * 4096 * 4096},
        {"name": "decode_m16", "tags": ["performance"], "inputs": _inputs(16, 14336, 4096),
         "flops": 2 * 16 * 14336 * 4096},
    ]
