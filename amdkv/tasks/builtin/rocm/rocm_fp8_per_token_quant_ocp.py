"""Dynamic per-token fp8 quantisation to torch.float8_e4m3fn (as on MI350X (gfx950)) with one fp32 scale per row, fp16 in."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "quant",
    "dtypes": ["fp16", "fp8e4m3fn"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


class Model(nn.Module):
    """x: [T, H]. scale[t] = max(amax_h |x[t, h]|, 1e-6) / FP8_MAX (fp32, shape [T, 1]);
    q = clamp(x / scale, -FP8_MAX, FP8_MAX) rounded to nearest-even fp8. Returns (q, scale).
    """

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        xf = x.float()
        amax = xf.abs().amax(dim=-1, keepdim=True)
        scale = amax.clamp(min=1e-6) / FP8_MAX
        q = (xf / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
        return q, scale


def _x(t, h):
    return lambda: [(3.0 * torch.randn(t, h)).to(torch.float16)]


def get_inputs():
    return _x(4096, 7168)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _x(5, 1000)},
        {"name": "small", "tags": ["correctness"], "inputs": _x(64, 512)},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _x(4096, 7168)},
        {"name": "decode_64", "tags": ["performance"], "inputs": _x(64, 8192)},
    ]
