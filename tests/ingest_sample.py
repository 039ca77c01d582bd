"""A small corpus in KernelBook's layout, written for the ingestion tests (all code original).

Each row says what `amdkv tasks ingest` must do with it: keep it, or drop it with a reason.
`python tests/ingest_sample.py OUT.jsonl` writes it as JSON lines (docs/ingest.md uses it).
"""

from __future__ import annotations

import json
import sys
from typing import Any

HEADER = "import torch\nimport torch.nn as nn\n\n\n"

SCALED_SILU = HEADER + '''class ScaledSiLU(nn.Module):
    """x * sigmoid(x), times a scale."""

    def __init__(self, scale=1.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return self.scale * x * torch.sigmoid(x)


def get_inputs():
    return [torch.rand([4, 4, 4, 4])]


def get_init_inputs():
    return [[], {'scale': 2.0}]
'''

# The same module without its docstring and blank lines, with other comments: an exact duplicate
# once comments, docstrings and whitespace are set aside.
SCALED_SILU_COPY = "# copied from another repository\n" + (
    SCALED_SILU.replace('    """x * sigmoid(x), times a scale."""\n', "").replace("\n\n\n", "\n").replace("\n\n", "\n")
    .replace("self.scale = scale", "self.scale = scale  # the scale"))
assert SCALED_SILU_COPY != SCALED_SILU

ROW_NORMALIZE = HEADER + '''class RowNormalize(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / (x.norm(dim=-1, keepdim=True) + 1e-6)


def get_inputs():
    return [torch.randn([8, 32])]


def get_init_inputs():
    return [[], {}]
'''

GATED_LINEAR = HEADER + '''class GatedLinear(nn.Module):
    def __init__(self, features, bias=False):
        super().__init__()
        self.proj = nn.Linear(features, 2 * features, bias=bias)

    def forward(self, x, y):
        a, b = self.proj(x + y).chunk(2, dim=-1)
        return a * torch.sigmoid(b)


def get_inputs():
    return [torch.randn([2, 8]), torch.randn([2, 8])]


def get_init_inputs():
    return [[8], {'bias': True}]
'''

MIXER_BLOCK = HEADER + '''class MixerBlock(nn.Module):
    """Token mixing then channel mixing, each with a residual connection and a layer norm."""

    def __init__(self, tokens, channels, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(channels)
        self.token_fc1 = nn.Linear(tokens, hidden)
        self.token_fc2 = nn.Linear(hidden, tokens)
        self.norm2 = nn.LayerNorm(channels)
        self.channel_fc1 = nn.Linear(channels, hidden)
        self.channel_fc2 = nn.Linear(hidden, channels)

    def forward(self, x):
        y = self.norm1(x).transpose(1, 2)
        y = self.token_fc2(torch.relu(self.token_fc1(y))).transpose(1, 2)
        x = x + y
        y = self.norm2(x)
        y = self.channel_fc2(torch.relu(self.channel_fc1(y)))
        return x + y


def get_inputs():
    return [torch.randn([2, 16, 8])]


def get_init_inputs():
    return [[16, 8, 32], {}]
'''
# The same module with one constant and one default changed: a near duplicate.
MIXER_BLOCK_VARIANT = MIXER_BLOCK.replace("torch.randn([2, 16, 8])", "torch.randn([3, 16, 8])")

GOOD_GELU = HEADER + '''class TanhGelu(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def get_inputs():
    return [torch.randn([16, 64])]


def get_init_inputs():
    return [[], {}]
'''


def _module(name: str, forward_body: str, extra: str = "", inputs: str = "[torch.randn([4, 16])]") -> str:
    return HEADER + extra + f'''class {name}(nn.Module):
    def forward(self, x):
{forward_body}


def get_inputs():
    return {inputs}


def get_init_inputs():
    return [[], {{}}]
'''


KEYWORD_ONLY = HEADER + '''class KeywordOnly(nn.Module):
    def __init__(self, *, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


def get_inputs():
    return [torch.randn([4, 16])]


def get_init_inputs():
    return [[], {'scale': 3.0}]
'''

KERNELBENCH_STYLE = HEADER + '''class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(8, 40)]


def get_init_inputs():
    return [1]
'''

# (entry point, code, licences, expected outcome: "kept" or the drop reason)
CASES: list[tuple[str, str, Any, str]] = [
    ("ScaledSiLU", SCALED_SILU, ["MIT"], "kept"),
    ("RowNormalize", ROW_NORMALIZE, ["Apache-2.0"], "kept"),
    ("GatedLinear", GATED_LINEAR, ["BSD-3-Clause"], "kept"),
    ("ScaledSiLU", SCALED_SILU_COPY, ["MIT"], "exact_duplicate"),
    ("MixerBlock", MIXER_BLOCK, ["mit"], "kept"),
    ("MixerBlock", MIXER_BLOCK_VARIANT, ["MIT"], "near_duplicate"),
    ("TanhGelu", GOOD_GELU, ["GPL-3.0"], "licence_not_allowed"),
    ("TanhGelu", GOOD_GELU, [], "no_licence"),
    ("TanhGelu", GOOD_GELU, ["MIT", "GPL-2.0"], "licence_not_allowed"),
    ("Broken", HEADER + "class Broken(nn.Module):\n    def forward(self, x)\n        return x\n", ["MIT"], "syntax_error"),
    ("NoInputs", HEADER + "class NoInputs(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n"
                          "def get_init_inputs():\n    return [[], {}]\n", ["MIT"], "missing_function"),
    ("Elsewhere", GOOD_GELU, ["MIT"], "missing_entry_point"),
    ("WrongShape", _module("WrongShape", "        return x @ x"), ["MIT"], "reference_error"),
    ("Jittery", _module("Jittery", "        return x * random.random()", extra="import random\n\n\n"), ["MIT"],
     "nondeterministic"),
    ("Constant", _module("Constant", "        return torch.full_like(x, 3.0)"), ["MIT"], "constant_output"),
    ("Zero", _module("Zero", "        return x * 0"), ["MIT"], "all_zero_output"),
    ("LogNeg", _module("LogNeg", "        return torch.log(-1.0 - x.abs())"), ["MIT"], "non_finite_output"),
    ("Writer", _module("Writer", "        open('/tmp/amdkv_ingest_probe.txt', 'w').write('x')\n        return x + 1"),
     ["MIT"], "sandbox_violation"),
    ("Reader", _module("Reader", "        return x + len(open('/etc/hostname').read())"), ["MIT"], "sandbox_violation"),
    ("Spinner", _module("Spinner", "        return x", extra="while True:\n    pass\n\n\n"), ["MIT"], "timeout"),
    ("Missing", _module("Missing", "        return x", extra="import amdkv_no_such_module\n\n\n"), ["MIT"],
     "import_error"),
    ("KeywordOnly", KEYWORD_ONLY, ["MIT"], "load_error"),
    ("Model", KERNELBENCH_STYLE, ["Apache-2.0"], "kept"),
    ("TanhGelu", GOOD_GELU, ["BSD-2-Clause"], "kept"),
]


def rows() -> list[dict[str, Any]]:
    """The corpus rows, with KernelBook's columns."""
    out = []
    for i, (entry, code, lic, _) in enumerate(CASES):
        out.append({"entry_point": entry, "python_code": code, "triton_code": "", "repo_name": f"example/repo{i}",
                    "module_name": entry.lower(), "licenses": list(lic),
                    "stars": i, "sha": f"{i:040x}", "uuid": f"{i:08d}-0000-0000-0000-000000000000",
                    "synthetic": False, "repo_link": f"https://example.org/repo{i}"})
    return out


def expected() -> dict[int, str]:
    return {i: case[3] for i, case in enumerate(CASES)}


if __name__ == "__main__":
    with open(sys.argv[1], "w") as f:
        for r in rows():
            f.write(json.dumps(r) + "\n")
