"""Row-parallel (K-sharded) linear reduced without all-reduce: split-K fp32 partials summed, decode sizes, fp16."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "matmul",
    "dtypes": ["fp16"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """weight [N, K] is split along K into tp_size equal shards (one per simulated rank); each shard's partial
    product x[:, shard] @ weight[:, shard]^T is kept in fp32 and the partials are summed, then cast to fp16.
    """

    def __init__(self, in_features: int = 14336, out_features: int = 4096, tp_size: int = 8):
        super().__init__()
        self.tp_size = tp_size
        w = torch.randn(out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.float16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs = x.float().chunk(self.tp_size, dim=1)
        ws = self.weight.float().chunk(self.tp_size, dim=1)
        total = xs[0] @ ws[0].t()
        for r in range(1, self.tp_size):
            total = total + xs[r] @ ws[r].t()
        return total.to(x.dtype)


def _x(m, k):
    return lambda: [torch.randn(m, k).to(torch.float16)]


def get_inputs():
    return _x(8, 14336)()


def get_init_inputs():
    return [14336, 4096, 8]


def get_cases():
    return [
        {"name": "small_tp2", "tags": ["correctness"], "inputs": _x(4, 512), "init_inputs": [512, 128, 2]},
        {"name": "odd_tp3", "tags": ["correctness"], "inputs": _x(5, 480), "init_inputs": [480, 100, 3]},
        {"name": "decode_m8_down_proj", "tags": ["performance"], "inputs": _x(8, 14336),
         "init_inputs": [14336, 4096, 8], "flops": 2 * 8 * 4096 * 14336},
        {"name": "decode_m64_70b_down_proj", "tags": ["performance"], "inputs": _x(64, 28672),
         "init_inputs": [28672, 8192, 8], "flops": 2 * 64 * 8192 * 28672},
    ]
