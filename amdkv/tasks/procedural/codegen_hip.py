"""The templated HIP reference solution of a procedural task, where the template allows it.

Elementwise and row compositions get a HIP solution (KernelBench HIP style: kernels and the torch
binding in `cpp_sources`, built with `CXX=hipcc`); matmul/linear compositions do not (a tiled
HIP GEMM with a fused prologue is a template of its own, not written yet). The HIP code mirrors
the Triton templates: `prologue(...)` and `epilogue(v)` device functions in fp32, a grid-stride
elementwise kernel, and one block per row with wavefront-size-aware block reductions (warpSize is
64 on CDNA, 32 on NVIDIA) for the row cores.
"""

from __future__ import annotations

from amdkv.tasks.procedural.layout import LEAKY_SLOPE, NORM_EPS, SOFTPLUS_THRESHOLD, TORCH_DTYPE, Layout

THREADS = 256
C_TYPE = {"fp32": "float", "fp16": "__half"}
TORCH_KIND = {"fp32": "torch::kFloat32", "fp16": "torch::kFloat16"}

BINARY = {"add": "{a} + {b}", "sub": "{a} - {b}", "mul": "{a} * {b}", "maximum": "fmaxf({a}, {b})",
          "minimum": "fminf({a}, {b})"}
UNARY = {"abs": "fabsf({a})", "neg": "-{a}", "square": "{a} * {a}"}
ACTIVATION = {"relu": "fmaxf({a}, 0.f)", "leaky_relu": f"({{a}} >= 0.f ? {{a}} : {LEAKY_SLOPE}f * {{a}})",
              "sigmoid": "1.f / (1.f + expf(-{a}))", "tanh": "tanhf({a})", "silu": "{a} / (1.f + expf(-{a}))",
              "gelu": "0.5f * {a} * (1.f + erff({a} * 0.70710678118654752f))",
              "softplus": f"({{a}} > {SOFTPLUS_THRESHOLD}f ? {{a}} : log1pf(expf({{a}})))"}

COMMON = r"""#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ void store_as(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store_as(__half* p, int64_t i, float v) { p[i] = __float2half(v); }

struct SumOp { __device__ float operator()(float a, float b) const { return a + b; } };
struct MaxOp { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
struct MinOp { __device__ float operator()(float a, float b) const { return fminf(a, b); } };

// Reduction over the whole block (blockDim.x a multiple of warpSize, at most 1024 threads):
// first inside each wavefront with shuffles, then across wavefronts through shared memory.
template <typename Op>
__device__ float reduce_block(float v, Op op) {
  __shared__ float partial[32];
  for (int offset = warpSize / 2; offset > 0; offset >>= 1) v = op(v, __shfl_xor(v, offset));
  const int lane = threadIdx.x % warpSize, wave = threadIdx.x / warpSize;
  if (lane == 0) partial[wave] = v;
  __syncthreads();
  float r = partial[0];
  for (int w = 1; w < (int)(blockDim.x / warpSize); ++w) r = op(r, partial[w]);
  __syncthreads();
  return r;
}
"""


def hip_supported(layout: Layout) -> bool:
    return layout.comp.template in ("elementwise", "rowwise")


def _ptr(name: str, dtype: str, const: bool = True) -> str:
    """Host expression of a tensor's data pointer as the kernel's element type."""
    c = "const " if const else ""
    if dtype == "fp32":
        return f"{name}.data_ptr<float>()"
    return f"reinterpret_cast<{c}__half*>({name}.data_ptr<at::Half>())"


def _device_helpers(layout: Layout) -> list[str]:
    t = C_TYPE[layout.in_dtype]
    params = [f"const {t}* __restrict__ x"] + [f"const {t}* __restrict__ {o.name}" for o in layout.operands] + \
        [f"float {s}" for s in layout.scalar_names] + ["int64_t i", "int64_t r", "int64_t c"]
    lines = ["// x (and operands) at flat index i (row r, column c), prologue applied, in fp32",
             f"__device__ __forceinline__ float prologue({', '.join(params)}) {{", "  float v = to_float(x[i]);"]
    index = {"row": "c", "col": "r", "full": "i"}
    scalars = iter(layout.scalar_names)
    operands = iter(layout.operands)
    for step in layout.comp.prologue:
        if step.operand is None:
            lines.append("  v = " + UNARY[step.op].format(a="v") + ";")
        elif step.operand == "scalar":
            lines.append("  v = " + BINARY[step.op].format(a="v", b=next(scalars)) + ";")
        else:
            o = next(operands)
            lines.append("  v = " + BINARY[step.op].format(a="v", b=f"to_float({o.name}[{index[o.kind]}])") + ";")
    lines += ["  return v;", "}", "__device__ __forceinline__ float epilogue(float v) {"]
    lines += ["  v = " + ACTIVATION[a].format(a="v") + ";" for a in layout.comp.activations]
    return lines + ["  return v;", "}"]


def _call_prologue(layout: Layout, i: str, r: str, c: str) -> str:
    return f"prologue({', '.join(['x'] + [o.name for o in layout.operands] + layout.scalar_names + [i, r, c])})"


def _kernel_params(layout: Layout) -> list[str]:
    t, o = C_TYPE[layout.in_dtype], C_TYPE[layout.out_dtype]
    return [f"const {t}* __restrict__ x"] + [f"const {t}* __restrict__ {op.name}" for op in layout.operands] + \
        [f"const {t}* __restrict__ {p}" for p in layout.param_names] + [f"{o}* __restrict__ out"] + \
        [f"float {s}" for s in layout.scalar_names]


def _elementwise_kernel(layout: Layout) -> list[str]:
    params = _kernel_params(layout) + ["int64_t numel", "int64_t n_cols"]
    return [f"__global__ void fused_kernel({', '.join(params)}) {{",
            "  const int64_t stride = (int64_t)gridDim.x * blockDim.x;",
            "  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += stride) {",
            f"    store_as(out, i, epilogue({_call_prologue(layout, 'i', 'i / n_cols', 'i % n_cols')}));",
            "  }", "}"]


def _row_loop(layout: Layout, body: str) -> str:
    return (f"  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) {{ "
            f"const float v = {_call_prologue(layout, 'base + c', 'r', 'c')}; {body} }}")


def _row_write(layout: Layout, y: str) -> list[str]:
    scale = " * to_float(weight[c])" if "weight" in layout.param_names else ""
    shift = " + to_float(bias[c])" if "bias" in layout.param_names else ""
    return [_row_loop(layout, f"store_as(out, base + c, epilogue(({y}){scale}{shift}));")]


def _rowwise_kernel(layout: Layout) -> list[str]:
    core = layout.comp.core
    params = _kernel_params(layout) + ["int64_t n_cols"]
    lines = [f"__global__ void fused_kernel({', '.join(params)}) {{",
             "  const int64_t r = blockIdx.x;", "  const int64_t base = r * n_cols;"]
    if core in ("sum", "mean"):
        lines += ["  float acc = 0.f;", _row_loop(layout, "acc += v;"), "  acc = reduce_block(acc, SumOp());"]
        if core == "mean":
            lines.append("  acc /= (float)n_cols;")
        lines.append("  if (threadIdx.x == 0) store_as(out, r, epilogue(acc));")
    elif core in ("amax", "amin"):
        init, op, fn = ("-INFINITY", "MaxOp", "fmaxf") if core == "amax" else ("INFINITY", "MinOp", "fminf")
        lines += [f"  float acc = {init};", _row_loop(layout, f"acc = {fn}(acc, v);"),
                  f"  acc = reduce_block(acc, {op}());", "  if (threadIdx.x == 0) store_as(out, r, epilogue(acc));"]
    elif core in ("softmax", "log_softmax"):
        lines += ["  float m = -INFINITY;", _row_loop(layout, "m = fmaxf(m, v);"), "  m = reduce_block(m, MaxOp());",
                  "  float s = 0.f;", _row_loop(layout, "s += expf(v - m);"), "  s = reduce_block(s, SumOp());"]
        lines += _row_write(layout, "expf(v - m) / s" if core == "softmax" else "v - m - logf(s)")
    elif core == "layernorm":
        lines += ["  float acc = 0.f;", _row_loop(layout, "acc += v;"),
                  "  const float mean = reduce_block(acc, SumOp()) / (float)n_cols;",
                  "  float dev = 0.f, sq = 0.f;", _row_loop(layout, "dev += v - mean; sq += (v - mean) * (v - mean);"),
                  # the mean of the deviations corrects the rounding of the first mean (constant rows)
                  "  dev = reduce_block(dev, SumOp()) / (float)n_cols;",
                  f"  const float rstd = 1.f / sqrtf(reduce_block(sq, SumOp()) / (float)n_cols - dev * dev + {NORM_EPS['layernorm']}f);",
                  "  const float mean2 = mean + dev;"]
        lines += _row_write(layout, "(v - mean2) * rstd")
    elif core == "rmsnorm":
        lines += ["  float sq = 0.f;", _row_loop(layout, "sq += v * v;"),
                  f"  const float rstd = 1.f / sqrtf(reduce_block(sq, SumOp()) / (float)n_cols + {NORM_EPS['rmsnorm']}f);"]
        lines += _row_write(layout, "v * rstd")
    else:
        raise ValueError(f"no HIP row template for core {core!r}")
    return lines + ["}"]


def _binding(layout: Layout) -> list[str]:
    tensors = layout.forward_names + layout.param_names
    args = [f"torch::Tensor {n}" for n in tensors] + [f"double {s}" for s in layout.scalar_names]
    lines = [f"torch::Tensor run({', '.join(args)}) {{"]
    lines += [f"  {n} = {n}.contiguous();" for n in tensors]
    lines += ["  const int64_t n_cols = x.size(-1);", "  const int64_t rows = x.numel() / n_cols;",
              "  auto sizes = x.sizes().vec();"]
    if layout.reduces_rows:
        lines.append("  sizes.pop_back();")
    lines.append(f"  auto out = torch::empty(sizes, x.options().dtype({TORCH_KIND[layout.out_dtype]}));")
    ptrs = [_ptr(n, layout.in_dtype) for n in tensors] + [_ptr("out", layout.out_dtype, const=False)] + \
        [f"(float){s}" for s in layout.scalar_names]
    if layout.comp.template == "elementwise":
        lines.append(f"  const int64_t blocks = std::min<int64_t>((x.numel() + {THREADS - 1}) / {THREADS}, 65535);")
        grid, extra = "dim3((unsigned)blocks)", ["x.numel()", "n_cols"]
    else:
        grid, extra = "dim3((unsigned)rows)", ["n_cols"]
    lines += ["  if (x.numel() > 0)",
              f"    hipLaunchKernelGGL(fused_kernel, {grid}, dim3({THREADS}), 0, 0, {', '.join(ptrs + extra)});",
              "  return out;", "}"]
    return lines


def _model_new(layout: Layout) -> list[str]:
    init_sig = ", ".join(["self"] + [f"{n}: float" for n in layout.scalar_names] + [f"{n}: int" for n in layout.size_names])
    init = [f"self.{n} = {n}" for n in layout.scalar_names]
    for p in layout.param_names:
        init.append(f"self.{p} = nn.Parameter(torch.empty(n_features, dtype={TORCH_DTYPE[layout.in_dtype]}))")
    call = layout.forward_names + [f"self.{p}" for p in layout.param_names] + [f"self.{s}" for s in layout.scalar_names]
    lines = ["class ModelNew(nn.Module):", f"    def __init__({init_sig}):", "        super().__init__()"]
    lines += [f"        {line}" for line in init]
    return lines + ["", f"    def forward(self, {', '.join(layout.forward_names)}):",
                    f"        return ext.run({', '.join(call)})"]


def hip_source(layout: Layout) -> str:
    """The whole HIP solution file, or raises ValueError when the template does not allow one."""
    if not hip_supported(layout):
        raise ValueError(f"no HIP template for {layout.comp.template} compositions")
    spec = layout.spec
    kernel = _elementwise_kernel(layout) if layout.comp.template == "elementwise" else _rowwise_kernel(layout)
    src = COMMON + "\n".join(_device_helpers(layout) + [""] + kernel + [""] + _binding(layout)) + "\n"
    return "\n".join([
        f'"""Templated HIP solution of {spec.task_id}: {layout.comp.describe(spec.dtype)} '
        f'(generated by amdkv.tasks.procedural; KernelBench HIP style, built with CXX=hipcc)."""',
        "import os", "", "import torch", "import torch.nn as nn", "from torch.utils.cpp_extension import load_inline",
        "", 'os.environ["CXX"] = "hipcc"', "", f'hip_src = r"""\n{src}"""', "",
        f'ext = load_inline(name="amdkv_{spec.task_id}", cpp_sources=hip_src, functions=["run"],',
        '                  extra_cflags=["-O3"], verbose=False)', "", ""] + _model_new(layout) + [""])
