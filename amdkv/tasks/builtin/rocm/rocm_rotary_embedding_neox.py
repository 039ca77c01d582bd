"""Neox-style rotary embedding applied to flattened q/k at given token positions with a cos/sin cache, fp16."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "rotary",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """query: [T, num_heads*head_size], key: [T, num_kv_heads*head_size], positions: int64 [T].

    cos_sin_cache[p] = [cos(p*f_0..f_{r/2-1}), sin(p*f_0..f_{r/2-1})] with r = rotary_dim. Neox style
    rotates the pair (x[i], x[i + r/2]) for i < r/2; dimensions >= rotary_dim pass through.
    """

    def __init__(self, head_size: int = 128, rotary_dim: int = 128, max_position: int = 8192,
                 base: float = 500000.0):
        super().__init__()
        self.head_size = head_size
        self.rotary_dim = rotary_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
        t = torch.arange(max_position, dtype=torch.float64)
        freqs = torch.outer(t, inv_freq)
        cache = torch.cat([freqs.cos(), freqs.sin()], dim=-1).to(torch.float32)
        self.register_buffer("cos_sin_cache", cache)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        t = x.shape[0]
        x = x.view(t, -1, self.head_size)
        half = self.rotary_dim // 2
        xf = x.to(cos.dtype)
        x1 = xf[..., :half]
        x2 = xf[..., half:self.rotary_dim]
        o1 = x1 * cos - x2 * sin
        o2 = x2 * cos + x1 * sin
        out = torch.cat([o1, o2, xf[..., self.rotary_dim:]], dim=-1)
        return out.to(x.dtype).reshape(t, -1)

    def forward(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor):
        cs = self.cos_sin_cache[positions]
        half = self.rotary_dim // 2
        cos = cs[:, None, :half]
        sin = cs[:, None, half:]
        return self._rotate(query, cos, sin), self._rotate(key, cos, sin)


def _inputs(t, hq, hk, d, max_pos):
    def make():
        positions = torch.randint(0, max_pos, (t,), dtype=torch.int64)
        q = torch.randn(t, hq * d).to(torch.float16)
        k = torch.randn(t, hk * d).to(torch.float16)
        return [positions, q, k]
    return make


def get_inputs():
    return _inputs(4096, 32, 8, 128, 8192)()


def get_init_inputs():
    return [128, 128, 8192, 500000.0]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(5, 4, 2, 64, 256),
         "init_inputs": [64, 64, 256, 10000.0]},
        {"name": "odd_partial", "tags": ["correctness"], "inputs": _inputs(13, 6, 2, 80, 300),
         "init_inputs": [80, 40, 300, 10000.0]},
        {"name": "prefill_4096", "tags": ["performance"], "inputs": _inputs(4096, 32, 8, 128, 8192),
         "init_inputs": [128, 128, 8192, 500000.0]},
        {"name": "decode_64", "tags": ["performance"], "inputs": _inputs(64, 64, 8, 128, 8192),
         "init_inputs": [128, 128, 8192, 500000.0]},
    ]
