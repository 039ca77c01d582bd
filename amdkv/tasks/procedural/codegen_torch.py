"""The reference task file of a procedural task: a KernelBench-format PyTorch program.

The program spells each piece of the composition with the PyTorch op a person would write
(`torch.clamp(t, min=s)` for a scalar maximum, `F.layer_norm`, `F.linear`, ...), computing at
the task's dtype, as eager PyTorch code does; METADATA and the cases are filled in by
amdkv.tasks.procedural.materialise.
"""

from __future__ import annotations

import pprint
from typing import Any

from amdkv.tasks.procedural.layout import LEAKY_SLOPE, NORM_EPS, TORCH_DTYPE, Layout
from amdkv.tasks.procedural.sampler import CaseShape

BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}",
          "maximum": "torch.maximum({a}, {b})", "minimum": "torch.minimum({a}, {b})"}
BINARY_SCALAR = {"maximum": "torch.clamp({a}, min={b})", "minimum": "torch.clamp({a}, max={b})"}
UNARY = {"abs": "torch.abs({a})", "neg": "-{a}", "square": "{a} * {a}"}
ACTIVATION = {"relu": "F.relu({a})", "leaky_relu": f"F.leaky_relu({{a}}, {LEAKY_SLOPE})",
              "sigmoid": "torch.sigmoid({a})", "tanh": "torch.tanh({a})", "silu": "F.silu({a})",
              "gelu": "F.gelu({a})", "softplus": "F.softplus({a})"}
CORE = {
    "sum": "t.sum(dim=-1)", "mean": "t.mean(dim=-1)", "amax": "t.amax(dim=-1)", "amin": "t.amin(dim=-1)",
    "softmax": "torch.softmax(t, dim=-1)", "log_softmax": "torch.log_softmax(t, dim=-1)",
    "matmul": "torch.matmul(t, w)",
}


def _core_expr(layout: Layout) -> str:
    core, params = layout.comp.core, layout.comp.core_params
    if core == "layernorm":
        affine = "self.weight, self.bias" if params else "None, None"
        return f"F.layer_norm(t, (t.shape[-1],), {affine}, eps={NORM_EPS[core]})"
    if core == "rmsnorm":
        return f"F.rms_norm(t, (t.shape[-1],), {'self.weight' if params else 'None'}, eps={NORM_EPS[core]})"
    if core == "linear":
        return f"F.linear(t, self.weight{', self.bias' if params else ''})"
    return CORE[core]


def _init_body(layout: Layout) -> list[str]:
    dt = "dtype=DTYPE"
    lines = [f"self.{n} = {n}" for n in layout.scalar_names]
    core = layout.comp.core
    if core == "linear":
        lines.append(f"self.weight = nn.Parameter(torch.randn(out_features, in_features, {dt}) / in_features ** 0.5)")
        if layout.comp.core_params:
            lines.append(f"self.bias = nn.Parameter(0.1 * torch.randn(out_features, {dt}))")
    elif core in ("layernorm", "rmsnorm") and layout.comp.core_params:
        lines.append(f"self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(n_features, {dt}))")
        if core == "layernorm":
            lines.append(f"self.bias = nn.Parameter(0.1 * torch.randn(n_features, {dt}))")
    return lines


def _forward_body(layout: Layout) -> list[str]:
    lines = ["t = x"]
    scalars = iter(layout.scalar_names)
    operands = iter(layout.operands)
    for step in layout.comp.prologue:
        if step.operand is None:
            lines.append("t = " + UNARY[step.op].format(a="t"))
        elif step.operand == "scalar":
            b = f"self.{next(scalars)}"
            lines.append("t = " + BINARY_SCALAR.get(step.op, BINARY[step.op]).format(a="t", b=b))
        else:
            lines.append("t = " + BINARY[step.op].format(a="t", b=next(operands).name))
    if layout.comp.core != "none":
        lines.append("t = " + _core_expr(layout))
    lines += ["t = " + ACTIVATION[a].format(a="t") for a in layout.comp.activations]
    if layout.comp.cast:
        lines.append(f"t = t.to({TORCH_DTYPE[layout.out_dtype]})")
    return lines + ["return t"]


def _inputs_function(layout: Layout) -> list[str]:
    """`_inputs(lead, n[, k])`: standard-normal inputs of one case (CPU tensors, global RNG)."""
    matmul = layout.comp.template == "matmul"
    last = "k" if matmul else "n"
    shapes = {"row": f"{last}", "col": "*lead, 1", "full": f"*lead, {last}"}
    out = [f"torch.randn(*lead, {last}, dtype=DTYPE)"]
    out += [f"torch.randn({shapes[o.kind]}, dtype=DTYPE)" for o in layout.operands]
    if layout.comp.core == "matmul":
        out.append("torch.randn(k, n, dtype=DTYPE) / k ** 0.5")
    sig = "lead, k, n" if matmul else "lead, n"
    return [f"def _inputs({sig}):", f'    """Inputs of one case: x is (*lead, {last})."""',
            "    return [" + ", ".join(out) + "]"]


def _case_args(layout: Layout, case: CaseShape) -> str:
    if layout.comp.template == "matmul":
        return f"{case.lead!r}, {case.k}, {case.n}"
    return f"{case.lead!r}, {case.n}"


def _flops(layout: Layout, case: CaseShape) -> int | None:
    if layout.comp.template == "matmul":
        assert case.k is not None
        return 2 * case.rows * case.k * case.n
    return None


def reference_source(layout: Layout, metadata: dict[str, Any]) -> str:
    """The whole task file."""
    comp, spec = layout.comp, layout.spec
    init_sig = ", ".join(["self"] + [f"{n}: float" for n in layout.scalar_names]
                         + [f"{n}: int" for n in layout.size_names])
    perf = next(c for c in spec.cases if "performance" in c.tags)
    lines = [f'"""{comp.describe(spec.dtype)} (procedural task {spec.task_id})."""', "",
             "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "",
             f"DTYPE = {TORCH_DTYPE[layout.in_dtype]}", "",
             "METADATA = " + pprint.pformat(metadata, width=110, sort_dicts=False), "", "",
             "class Model(nn.Module):", f"    def __init__({init_sig}):", "        super().__init__()"]
    lines += [f"        {line}" for line in _init_body(layout)]
    lines += ["", f"    def forward(self, {', '.join(layout.forward_names)}):"]
    lines += [f"        {line}" for line in _forward_body(layout)]
    lines += ["", ""] + _inputs_function(layout) + ["", "",
              "def get_inputs():", f"    return _inputs({_case_args(layout, perf)})", "", "",
              "def get_init_inputs():", f"    return {layout.init_values(perf)!r}", "", "",
              "def get_cases():", "    return ["]
    for case in spec.cases:
        fields = [f'"name": {case.name!r}', f'"tags": {list(case.tags)!r}',
                  f'"inputs": lambda: _inputs({_case_args(layout, case)})',
                  f'"init_inputs": {layout.init_values(case)!r}']
        flops = _flops(layout, case)
        if flops is not None:
            fields.append(f'"flops": {flops}')
        lines.append("        {" + ", ".join(fields) + "},")
    lines += ["    ]", ""]
    return "\n".join(lines)
