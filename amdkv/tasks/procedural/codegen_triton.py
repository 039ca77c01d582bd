"""The templated Triton reference solution of a procedural task: one fused kernel per composition.

Three templates, one per kind of core; all share two generated pieces of kernel code, inlined
where they are used: the prologue (load `x` and the operands at given indices, apply the prologue
steps in fp32) and the epilogue (the activations, in fp32). So the same prologue code runs on a
flat block (elementwise), on a block of one row (row cores, in every pass over the row) and on a
tile of the matmul's A operand, and the same epilogue runs on whatever the core produced.

- elementwise: flat 1-D blocks over `x`; row/column operands are indexed by `offs % N` / `offs // N`;
- rowwise: one program per ROWS = 4096 // BLOCK rows (at most 16: several short rows per program,
  up to 4 long ones), loops of [ROWS, BLOCK<=1024] tiles over them (1 pass for reductions, 2 for
  rmsnorm, 3 for softmax/log_softmax/layernorm: max, sum, write / mean, deviations, write);
- matmul: 2-D output tiles, a K loop whose A tiles go through the prologue (re-masked, since the
  prologue of a masked-out zero need not be zero), fp32 accumulation (`input_precision="ieee"` for
  fp32 inputs: TF32 would not meet the tolerance of an fp32 task), bias and epilogue on the tile.
"""

from __future__ import annotations

from amdkv.tasks.procedural.layout import LEAKY_SLOPE, NORM_EPS, SOFTPLUS_THRESHOLD, TORCH_DTYPE, Layout

ROW_BLOCK = 1024
ROW_TILE = 4096   # elements of a row program's tile: ROWS = ROW_TILE // BLOCK rows (at most MAX_ROWS)
MAX_ROWS = 16
FLAT_BLOCK = 1024
# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps) per input dtype
MATMUL_CONFIG = {"fp32": (64, 64, 32, 4), "fp16": (128, 128, 32, 8)}

BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}",
          "maximum": "tl.maximum({a}, {b})", "minimum": "tl.minimum({a}, {b})"}
UNARY = {"abs": "tl.abs({a})", "neg": "-{a}", "square": "{a} * {a}"}
ACTIVATION = {"relu": "tl.maximum({a}, 0.0)", "leaky_relu": f"tl.where({{a}} >= 0.0, {{a}}, {LEAKY_SLOPE} * {{a}})",
              "sigmoid": "tl.sigmoid({a})", "silu": "{a} * tl.sigmoid({a})",
              "gelu": "0.5 * {a} * (1.0 + tl.erf({a} * 0.7071067811865476))"}
# Activations Triton has no accurate primitive for (libdevice is not usable everywhere the verifier
# runs, e.g. the CPU interpreter), as lines that update `{a}` in place with temporaries `_t*`.
MULTI_LINE = {
    # tanh with full relative accuracy near 0, where (1 - e) / (1 + e) loses digits
    "tanh": ["_ta = tl.abs({a})",
             "_te = tl.exp(-2.0 * _ta)",
             "_t2 = _ta * _ta",
             "_tn = _ta * (1.0 + _t2 * (-1.0 / 3.0 + _t2 * (2.0 / 15.0 + _t2 * (-17.0 / 315.0 + _t2 * (62.0 / 2835.0)))))",
             "_tt = tl.where(_ta < 0.25, _tn, (1.0 - _te) / (1.0 + _te))",
             "{a} = tl.where({a} < 0.0, -_tt, _tt)"],
    # log(1 + exp(v)) as torch computes it (v itself above the threshold); log1p(e) as
    # log(u) * e / (u - 1), in which the rounding of u = 1 + e cancels (e itself where u rounds to 1)
    "softplus": [f"_te = tl.exp(tl.minimum({{a}}, {SOFTPLUS_THRESHOLD}))",
                 "_tu = 1.0 + _te",
                 "_td = tl.where(_tu == 1.0, 1.0, _tu - 1.0)",
                 "_tl = tl.where(_tu == 1.0, _te, tl.log(_tu) * (_te / _td))",
                 f"{{a}} = tl.where({{a}} > {SOFTPLUS_THRESHOLD}, {{a}}, _tl)"],
}


def _prologue_lines(layout: Layout, offs: str, rows: str, cols: str, mask: str, out: str = "v") -> list[str]:
    """Lines that set `out` to x (and operands) at flat index `offs` (row `rows`, column `cols`),
    prologue applied, in fp32. Inlined at every use: under the Triton interpreter a call to another
    @triton.jit function costs milliseconds (it re-patches triton.language on every call)."""
    lines = [f"{out} = tl.load(x_ptr + {offs}, mask={mask}, other=0.0).to(tl.float32)"]
    index = {"row": cols, "col": rows, "full": offs}
    scalars = iter(layout.scalar_names)
    operands = iter(layout.operands)
    for step in layout.comp.prologue:
        if step.operand is None:
            lines.append(f"{out} = " + UNARY[step.op].format(a=out))
            continue
        if step.operand == "scalar":
            b = next(scalars)
        else:
            o = next(operands)
            b = f"_{o.name}"
            lines.append(f"{b} = tl.load({o.name}_ptr + {index[o.kind]}, mask={mask}, other=0.0).to(tl.float32)")
        lines.append(f"{out} = " + BINARY[step.op].format(a=out, b=b))
    return lines


def _epilogue_lines(layout: Layout, var: str) -> list[str]:
    """Lines that apply the activations to `var` (fp32) in place."""
    lines = []
    for act in layout.comp.activations:
        if act in MULTI_LINE:
            lines += [line.format(a=var) for line in MULTI_LINE[act]]
        else:
            lines.append(f"{var} = " + ACTIVATION[act].format(a=var))
    return lines


def _indent(lines: list[str], depth: int) -> list[str]:
    return [" " * (4 * depth) + line for line in lines]


def _tensor_args(layout: Layout) -> list[str]:
    """Kernel pointer arguments before `out_ptr`, in ModelNew's order."""
    ptrs = ["x_ptr"] + [f"{o.name}_ptr" for o in layout.operands]
    if layout.comp.core == "matmul":
        ptrs.append("w_ptr")
    return ptrs + [f"{p}_ptr" for p in layout.param_names]


# ------------------------------------------------------------------------------------ templates
def _elementwise_kernel(layout: Layout) -> list[str]:
    args = _tensor_args(layout) + ["out_ptr"] + layout.scalar_names + ["numel", "n_cols", "BLOCK: tl.constexpr"]
    return ["@triton.jit", f"def _kernel({', '.join(args)}):",
            "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    mask = offs < numel"] + \
        _indent(_prologue_lines(layout, "offs", "offs // n_cols", "offs % n_cols", "mask"), 1) + \
        _indent(_epilogue_lines(layout, "v"), 1) + [
            "    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=mask)"]


def _row_pass(layout: Layout, body: list[str]) -> list[str]:
    """One loop over the program's rows, a [ROWS, BLOCK] tile at a time: `v` is the prologue's value."""
    return ["    for start in range(0, n_cols, BLOCK):",
            "        cols = start + tl.arange(0, BLOCK)[None, :]",
            "        mask = row_ok & (cols < n_cols)"] + \
        _indent(_prologue_lines(layout, "rows * n_cols + cols", "rows + zero", "cols + zero", "mask") + body, 2)


def _row_store(layout: Layout, y_expr: str) -> list[str]:
    """The writing pass of a row core: y (fp32), learned scale/shift, epilogue, store."""
    body = [f"y = {y_expr}"]
    if "weight" in layout.param_names:
        body.append("y = y * tl.load(weight_ptr + cols + zero, mask=mask, other=0.0).to(tl.float32)")
    if "bias" in layout.param_names:
        body.append("y = y + tl.load(bias_ptr + cols + zero, mask=mask, other=0.0).to(tl.float32)")
    body += _epilogue_lines(layout, "y") + ["tl.store(out_ptr + rows * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)"]
    return _row_pass(layout, body)


REDUCE = {"sum": ("0.0", "acc + tl.where(mask, v, 0.0)", "tl.sum"),
          "mean": ("0.0", "acc + tl.where(mask, v, 0.0)", "tl.sum"),
          "amax": ('float("-inf")', 'tl.maximum(acc, tl.where(mask, v, float("-inf")))', "tl.max"),
          "amin": ('float("inf")', 'tl.minimum(acc, tl.where(mask, v, float("inf")))', "tl.min")}
TILE = "[ROWS, BLOCK]"


def _row_stat(reduce: str, var: str) -> str:
    """A per-row statistic of a tile, kept as a [ROWS, 1] column so that it broadcasts over the row."""
    return f"{reduce}({var}, axis=1)[:, None]"


def _rowwise_body(layout: Layout) -> list[str]:
    core = layout.comp.core
    zeros = f"tl.zeros({TILE}, dtype=tl.float32)"
    if core in REDUCE:
        init, combine, reduce = REDUCE[core]
        lines = [f"    acc = tl.full({TILE}, {init}, tl.float32)"] + _row_pass(layout, [f"acc = {combine}"])
        lines.append(f"    r = {reduce}(acc, axis=1)" + (" / n_cols" if core == "mean" else ""))
        return lines + _indent(_epilogue_lines(layout, "r"), 1) + \
            ["    tl.store(out_ptr + row_ids, r.to(out_ptr.dtype.element_ty), mask=row_ids < n_rows)"]
    if core in ("softmax", "log_softmax"):
        lines = [f'    m = tl.full({TILE}, float("-inf"), tl.float32)']
        lines += _row_pass(layout, ['m = tl.maximum(m, tl.where(mask, v, float("-inf")))'])
        lines += [f"    row_max = {_row_stat('tl.max', 'm')}", f"    s = {zeros}"]
        lines += _row_pass(layout, ["s += tl.where(mask, tl.exp(v - row_max), 0.0)"])
        lines += [f"    total = {_row_stat('tl.sum', 's')}"]
        y = "tl.exp(v - row_max) / total" if core == "softmax" else "v - row_max - tl.log(total)"
        return lines + _row_store(layout, y)
    if core == "layernorm":
        lines = [f"    acc = {zeros}"] + _row_pass(layout, ["acc += tl.where(mask, v, 0.0)"])
        lines += [f"    mean = {_row_stat('tl.sum', 'acc')} / n_cols", f"    acc = {zeros}", f"    acc2 = {zeros}"]
        lines += _row_pass(layout, ["d = tl.where(mask, v - mean, 0.0)", "acc += d", "acc2 += d * d"])
        # the sum of deviations corrects the rounding of the first mean: an (almost) constant row,
        # whose deviations rstd = 1/sqrt(eps) amplifies ~300x, then normalises to (almost) 0 as in eager
        lines += [f"    dev = {_row_stat('tl.sum', 'acc')} / n_cols", "    mean += dev",
                  f"    rstd = 1.0 / tl.sqrt({_row_stat('tl.sum', 'acc2')} / n_cols - dev * dev + {NORM_EPS['layernorm']})"]
        return lines + _row_store(layout, "(v - mean) * rstd")
    if core == "rmsnorm":
        lines = [f"    acc = {zeros}"] + _row_pass(layout, ["acc += tl.where(mask, v * v, 0.0)"])
        lines += [f"    rstd = 1.0 / tl.sqrt({_row_stat('tl.sum', 'acc')} / n_cols + {NORM_EPS['rmsnorm']})"]
        return lines + _row_store(layout, "v * rstd")
    raise ValueError(f"no rowwise template for core {core!r}")


def _rowwise_kernel(layout: Layout) -> list[str]:
    args = _tensor_args(layout) + ["out_ptr"] + layout.scalar_names + \
        ["n_rows", "n_cols", "ROWS: tl.constexpr", "BLOCK: tl.constexpr"]
    return ["@triton.jit", f"def _kernel({', '.join(args)}):",
            "    row_ids = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)",
            "    rows = row_ids[:, None]",
            "    row_ok = rows < n_rows",
            f"    zero = tl.zeros({TILE}, dtype=tl.int64)  # row/column indices as full tiles"] + _rowwise_body(layout)


def _matmul_kernel(layout: Layout) -> list[str]:
    args = _tensor_args(layout) + ["out_ptr"] + layout.scalar_names + \
        ["M", "N", "K", "stride_wk", "stride_wn", "BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr",
         "BLOCK_K: tl.constexpr"]
    w = "w_ptr" if layout.comp.core == "matmul" else "weight_ptr"
    if layout.in_dtype == "fp32":
        dot = "acc = tl.dot(a, b, acc, input_precision=\"ieee\")"
    else:
        dot = "acc = tl.dot(a.to(tl.float16), b, acc)"
    lines = ["@triton.jit", f"def _kernel({', '.join(args)}):",
             "    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)",
             "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)",
             "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
             "    zero = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.int64)  # row/column indices as full tiles",
             "    for k0 in range(0, K, BLOCK_K):",
             "        rk = k0 + tl.arange(0, BLOCK_K)",
             "        a_mask = (rm[:, None] < M) & (rk[None, :] < K)"] + \
        _indent(_prologue_lines(layout, "rm[:, None].to(tl.int64) * K + rk[None, :]", "rm[:, None] + zero",
                                "rk[None, :] + zero", "a_mask", out="a"), 2) + [
             "        a = tl.where(a_mask, a, 0.0)",
             f"        b = tl.load({w} + rk[:, None] * stride_wk + rn[None, :].to(tl.int64) * stride_wn,",
             "                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)",
             f"        {dot}"]
    if "bias" in layout.param_names:
        lines.append("    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]")
    return lines + _indent(_epilogue_lines(layout, "acc"), 1) + [
                    "    out_mask = (rm[:, None] < M) & (rn[None, :] < N)",
                    "    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc.to(out_ptr.dtype.element_ty), "
                    "mask=out_mask)"]


# ------------------------------------------------------------------------------------ ModelNew
def _model_new(layout: Layout) -> list[str]:
    comp = layout.comp
    init_sig = ", ".join(["self"] + [f"{n}: float" for n in layout.scalar_names] + [f"{n}: int" for n in layout.size_names])
    init = [f"self.{n} = {n}" for n in layout.scalar_names]
    # Same parameter names and shapes as the reference: the verifier loads the reference's values.
    shapes = {"linear": {"weight": "out_features, in_features", "bias": "out_features"},
              "layernorm": {"weight": "n_features", "bias": "n_features"}, "rmsnorm": {"weight": "n_features"}}
    for p in layout.param_names:
        init.append(f"self.{p} = nn.Parameter(torch.empty({shapes[comp.core][p]}, dtype={TORCH_DTYPE[layout.in_dtype]}))")
    fwd = [f"{n} = {n}.contiguous()" for n in layout.forward_names]
    tensors = layout.forward_names + [f"self.{p}" for p in layout.param_names]
    scalars = [f"self.{n}" for n in layout.scalar_names]
    out_dt = TORCH_DTYPE[layout.out_dtype]
    if comp.template == "elementwise":
        fwd += [f"out = torch.empty(x.shape, dtype={out_dt}, device=x.device)",
                f"grid = (triton.cdiv(x.numel(), {FLAT_BLOCK}),)",
                f"_kernel[grid]({', '.join(tensors + ['out'] + scalars)}, x.numel(), x.shape[-1], BLOCK={FLAT_BLOCK})"]
    elif comp.template == "rowwise":
        shape = "x.shape[:-1]" if layout.reduces_rows else "x.shape"
        fwd += ["n_cols = x.shape[-1]",
                "n_rows = x.numel() // n_cols",
                f"out = torch.empty({shape}, dtype={out_dt}, device=x.device)",
                f"block = min(triton.next_power_of_2(n_cols), {ROW_BLOCK})",
                f"rows = max(1, min({MAX_ROWS}, {ROW_TILE} // block))  # several short rows per program",
                f"_kernel[(triton.cdiv(n_rows, rows),)]({', '.join(tensors + ['out'] + scalars)}, n_rows, n_cols,",
                "                                        ROWS=rows, BLOCK=block, num_warps=8)"]
    else:
        bm, bn, bk, warps = MATMUL_CONFIG[layout.in_dtype]
        if comp.core == "matmul":
            fwd += ["n = w.shape[1]", "stride_wk, stride_wn = w.stride(0), w.stride(1)"]
        else:  # F.linear's weight is (out_features, in_features)
            fwd += ["n = self.weight.shape[0]", "stride_wk, stride_wn = self.weight.stride(1), self.weight.stride(0)"]
        fwd += ["k = x.shape[-1]", "m = x.numel() // k",
                f"out = torch.empty((*x.shape[:-1], n), dtype={out_dt}, device=x.device)",
                f"grid = (triton.cdiv(m, {bm}), triton.cdiv(n, {bn}))",
                f"_kernel[grid]({', '.join(tensors + ['out'] + scalars)}, m, n, k, stride_wk, stride_wn,",
                f"              BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, num_warps={warps})"]
    fwd.append("return out")
    lines = ["class ModelNew(nn.Module):", f"    def __init__({init_sig}):", "        super().__init__()"]
    lines += [f"        {line}" for line in init]
    lines += ["", f"    def forward(self, {', '.join(layout.forward_names)}):"]
    return lines + [f"        {line}" for line in fwd]


KERNELS = {"elementwise": _elementwise_kernel, "rowwise": _rowwise_kernel, "matmul": _matmul_kernel}


def triton_source(layout: Layout) -> str:
    """The whole solution file (defines ModelNew)."""
    spec = layout.spec
    parts = [f'"""Templated Triton solution of {spec.task_id}: {layout.comp.describe(spec.dtype)}, one fused '
             f'{layout.comp.template} kernel (generated by amdkv.tasks.procedural)."""',
             "", "import torch", "import torch.nn as nn", "import triton", "import triton.language as tl", ""]
    parts += [""]
    parts += KERNELS[layout.comp.template](layout) + ["", ""] + _model_new(layout) + [""]
    return "\n".join(parts)
