"""Block-scaled fp8 GEMM (1x128 activation groups, 128x128 weight blocks), torch.float8_e4m3fnuz as on MI300X (gfx942), fp16 out."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["fp8e4m3fnuz", "fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}

FP8 = torch.float8_e4m3fnuz
FP8_MAX = 240.0
GROUP = 128


class Model(nn.Module):
    """a: fp8 [M, K], a_scale: fp32 [M, K/128] (one scale per row and 128-wide K group);
    b: fp8 [N, K], b_scale: fp32 [N/128, K/128] (one scale per 128x128 block). K and N are multiples of 128.
    out[m, n] = sum_k (a[m, k] * a_scale[m, k//128]) * (b[n, k] * b_scale[n//128, k//128]), returned in fp16.
    """

    def __init__(self):
        super().__init__()

    def forward(self, a, a_scale, b, b_scale):
        a_deq = a.to(a_scale.dtype) * a_scale.repeat_interleave(GROUP, dim=1)
        b_s = b_scale.repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)
        b_deq = b.to(b_scale.dtype) * b_s
        return (a_deq @ b_deq.t()).to(torch.float16)


def _quant_rows(x):
    m, k = x.shape
    g = x.view(m, k // GROUP, GROUP)
    scale = g.abs().amax(dim=-1).clamp(min=1e-6) / FP8_MAX
    q = (g / scale[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(m, k)
    return q, scale.to(torch.float32)


def _quant_blocks(w):
    n, k = w.shape
    g = w.view(n // GROUP, GROUP, k // GROUP, GROUP)
    scale = g.abs().amax(dim=(1, 3)).clamp(min=1e-6) / FP8_MAX
    q = (g / scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8).view(n, k)
    return q, scale.to(torch.float32)


def _inputs(m, n, k):
    def make():
        a, a_s = _quant_rows(torch.randn(m, k))
        b, b_s = _quant_blocks(torch.randn(n, k) * k ** -0.5)
        return [a, a_s, b, b_s]
    return make


def get_inputs():
    return _inputs(4096, 4096, 7168)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd_m33", "tags": ["correctness"], "inputs": _inputs(33, 256, 384)},
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(64, 128, 256)},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _inputs(4096, 4096, 7168),
         "flops": 2 * 4096 * 4096 * 7168},
        {"name": "decode_m32", "tags": ["performance"], "inputs": _inputs(32, 4608, 7168),
         "flops": 2 * 32 * 4608 * 7168},
    ]
