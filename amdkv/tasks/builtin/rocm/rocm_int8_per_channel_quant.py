"""Symmetric int8 per-output-channel weight quantisation (round half to even) with fp32 scales, fp16 in."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "quant",
    "dtypes": ["fp16", "int8"],
    # round(x / scale): a GPU's division is not correctly rounded, so a value on a rounding tie may
    # land one code away; allow that on at most 0.1% of elements (docs/verifier.md).
    "tolerance": {"int_steps": 1, "int_steps_fraction": 0.001},
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """w: [N, K]. scale[n] = max(amax_k |w[n, k]|, 1e-8) / 127 (fp32, [N, 1]);
    q = clamp(round_half_even(w / scale), -128, 127) as int8. Returns (q, scale).
    """

    def __init__(self):
        super().__init__()

    def forward(self, w: torch.Tensor):
        wf = w.float()
        scale = wf.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127.0
        q = torch.round(wf / scale).clamp(-128, 127).to(torch.int8)
        return q, scale


def _w(n, k):
    return lambda: [(0.05 * torch.randn(n, k)).to(torch.float16)]


def get_inputs():
    return _w(14336, 4096)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _w(37, 1000)},
        {"name": "small", "tags": ["correctness"], "inputs": _w(64, 256)},
        {"name": "llama8b_up_proj", "tags": ["performance"], "inputs": _w(14336, 4096)},
        {"name": "llama70b_down_proj", "tags": ["performance"], "inputs": _w(8192, 28672)},
    ]
