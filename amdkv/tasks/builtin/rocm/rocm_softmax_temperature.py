"""Temperature-scaled softmax over vocabulary-sized logit rows (fp16 logits in, fp32 probabilities out)."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 1,
    "op_family": "softmax",
    "dtypes": ["fp16", "fp32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """logits: fp16 [B, V]; temperature: fp32 [B] (> 0). Returns softmax(logits / temperature) in fp32."""

    def __init__(self):
        super().__init__()

    def forward(self, logits, temperature):
        s = logits.to(temperature.dtype) / temperature[:, None]
        return torch.softmax(s, dim=-1)


def _inputs(b, v):
    def make():
        logits = (5.0 * torch.randn(b, v)).to(torch.float16)
        temperature = torch.rand(b) * 1.5 + 0.1
        return [logits, temperature]
    return make


def get_inputs():
    return _inputs(64, 128256)()


def get_init_inputs():
    return []


def get_cases():
    return [
        {"name": "odd", "tags": ["correctness"], "inputs": _inputs(3, 5000)},
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(8, 1024)},
        {"name": "decode_64_llama3_vocab", "tags": ["performance"], "inputs": _inputs(64, 128256)},
        {"name": "decode_256_qwen_vocab", "tags": ["performance"], "inputs": _inputs(256, 151936)},
    ]
