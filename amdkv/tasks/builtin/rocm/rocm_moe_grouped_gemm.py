"""MoE grouped GEMM: rows already grouped by expert multiply their expert's weight, fp16."""

import torch
import torch.nn as nn

METADATA = {
    "suite": "rocm",
    "level": 2,
    "op_family": "moe",
    "dtypes": ["fp16", "int32"],
    "licence": "Apache-2.0",
    "provenance": "original (amdkv)",
}


class Model(nn.Module):
    """x: [M, K] rows sorted by expert; expert_offsets: int32 [E+1], non-decreasing, 0 .. M
    (rows expert_offsets[e]:expert_offsets[e+1] belong to expert e, possibly none).
    weight: [E, N, K]. Returns out [M, N] with out[rows of e] = x[rows of e] @ weight[e]^T.
    """

    def __init__(self, num_experts: int = 8, in_features: int = 4096, out_features: int = 14336):
        super().__init__()
        w = torch.randn(num_experts, out_features, in_features) * in_features ** -0.5
        self.weight = nn.Parameter(w.to(torch.float16))

    def forward(self, x: torch.Tensor, expert_offsets: torch.Tensor) -> torch.Tensor:
        out = x.new_empty(x.shape[0], self.weight.shape[1])
        offs = expert_offsets.tolist()
        for e in range(self.weight.shape[0]):
            s, t = offs[e], offs[e + 1]
            out[s:t] = x[s:t] @ self.weight[e].t()
        return out


def _inputs(m, k, e_num, empty_expert=None):
    def make():
        x = torch.randn(m, k).to(torch.float16)
        assign = torch.randint(0, e_num, (m,))
        if empty_expert is not None:
            assign[assign == empty_expert] = (empty_expert + 1) % e_num
        counts = torch.bincount(assign, minlength=e_num)
        offsets = torch.zeros(e_num + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(counts, 0)
        return [x, offsets.to(torch.int32)]
    return make


def get_inputs():
    return _inputs(8192, 4096, 8)()


def get_init_inputs():
    return [8, 4096, 14336]


def get_cases():
    return [
        {"name": "small", "tags": ["correctness"], "inputs": _inputs(70, 64, 4), "init_inputs": [4, 64, 96]},
        {"name": "odd_empty_expert", "tags": ["correctness"], "inputs": _inputs(150, 96, 6, empty_expert=2),
         "init_inputs": [6, 96, 80]},
        {"name": "mixtral_prefill_4096x2", "tags": ["performance"], "inputs": _inputs(8192, 4096, 8),
         "init_inputs": [8, 4096, 14336], "flops": 2 * 8192 * 14336 * 4096},
        {"name": "qwen_moe_64e", "tags": ["performance"], "inputs": _inputs(16384, 2048, 64),
         "init_inputs": [64, 2048, 2816], "flops": 2 * 16384 * 2816 * 2048},
    ]
