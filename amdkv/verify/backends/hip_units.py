"""Turn one captured `load_inline`/`load` call into the compilation units of a build scheme.

Pure text work, no compiler: the units' sources (headers, the generated `PYBIND11_MODULE`, launches
routed to torch's current stream), which unit goes to which compiler, for the split scheme the
forward declarations of the bound functions that let the binding unit compile apart from the device
code, and for the lean scheme the torch-free device part and the host part of each source. Kept apart from compiling (hip_build) so it can be tested, and reasoned about, without nvcc.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any

from amdkv.verify.backends.hip_sources import (TORCH_WORDS, _blank, _mask_comments_strings, device_part,
                                               global_kernel_names, is_template_kernel, masked_source, safe_flags,
                                               top_level_items)

PYBIND_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)")
DEVICE_CODE = re.compile(r"__global__|__device__|hipLaunchKernelGGL|<<<")
# headers whose templates launch kernels: a unit including them needs nvcc even without `__global__`
DEVICE_HEADER = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](hipcub|cub|thrust|rocprim|cooperative_groups)\b'
                           r'|^[ \t]*#[ \t]*include[ \t]*[<"]hip/hip_cooperative_groups\.h', re.M)
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)
EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][^\n]*$', re.M)
COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
FULL_HEADER = "#include <torch/extension.h>\n"
LIGHT_HEADER = "#include <torch/types.h>\n"
HIP_PRELUDE = "#include <hip/hip_runtime.h>\n"
# The compat header's float atomicMax/atomicMin helpers are device functions whose bodies name CUDA
# intrinsics that only nvcc declares; a host compiler parses those bodies (never calls them) and only
# needs the names. Without this, a host unit could not include <hip/hip_runtime.h>.
HOST_SHIM = ("#if !defined(__CUDACC__)\n"
             "int atomicCAS(int*, int, int);\nfloat __int_as_float(int);\nint __float_as_int(float);\n"
             "#endif\n")
# First lines of every host unit, and the text of their precompiled header (host_pch).
HOST_PRELUDE = FULL_HEADER + HOST_SHIM + HIP_PRELUDE
# Words before a bound function's name that make a forward declaration in another unit wrong or
# unresolvable at link time (internal linkage, not emitted, device-only, C linkage, a template).
# Namespace-scope `using` of torch/std names: copied into the binding unit so that declarations such
# as `Tensor f(Tensor x);` (after `using namespace torch;`) mean there what they meant in the source.
USING_HEADER_NAMES = re.compile(r"\busing\s+(?:namespace\s+)?(?:std|torch|at|c10)\b[\w:\s]*;")
NOT_DECLARABLE = re.compile(r"\b(static|inline|__inline__|__forceinline__|template|constexpr|consteval|__global__|"
                            r"__device__|extern|friend|virtual|operator|typedef|using|return)\b|[=().]|->")


class SplitUnavailable(Exception):
    """The split scheme cannot be set up for this call (a bound function's definition was not found or
    cannot be declared elsewhere): it is built with the full scheme."""


# ------------------------------------------------------------------------------------ sources
def _split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def route_launches_to_current_stream(src: str) -> str:
    """`k<<<g, b>>>` / `<<<g, b, s>>>` / `<<<g, b, s, st>>>` -> the 4-argument form whose stream is
    `amdkv_hip_stream(st)` (the compat header maps the null stream to torch's current stream).
    Why: a launch on the legacy null stream while torch captures a CUDA graph for timing breaks the
    capture; on AMD with torch the null stream is torch's default stream, so meaning is unchanged."""

    def fix(m: re.Match) -> str:
        args = _split_top_level(m.group(1))
        if len(args) == 2:
            args += ["0", "amdkv_hip_stream(0)"]
        elif len(args) == 3:
            args.append("amdkv_hip_stream(0)")
        elif len(args) == 4 and "amdkv_hip_stream" not in args[3]:
            args[3] = f"amdkv_hip_stream({args[3].strip()})"
        return "<<<" + ",".join(args) + ">>>"

    return LAUNCH.sub(fix, src)


def _binding(functions: Any) -> str:
    if not functions:
        return ""
    items = functions.items() if isinstance(functions, dict) else ((f, f) for f in functions)
    defs = "\n".join(f'  m.def("{n}", torch::wrap_pybind_function({n}), "{str(d).replace(chr(34), "")}");'
                     for n, d in items)
    return f"\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{\n{defs}\n}}\n"


def _function_names(functions: Any) -> list[str]:
    return list(functions.keys() if isinstance(functions, dict) else functions or [])


@dataclasses.dataclass
class Unit:
    name: str       # file name inside the build dir
    text: str
    flags: list[str]
    kind: str = "device"            # "device": nvcc/hipcc | "host": the host C++ compiler (split, lean)
    # functions this unit only declares and another unit defines (the split's bound functions, the lean
    # scheme's kernels): after compiling, each must be exported by another object (hip_build)
    binds: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------ declarations
def _strip_comments(code: str) -> str:
    """`code` without comments, string and char literals kept (default arguments may hold them)."""
    return COMMENT_OR_LITERAL.sub(lambda m: " " if m.group(0).startswith("/") else m.group(0), code)


def _matching_paren(code: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return None


def function_declaration(name: str, src: str) -> str | None:
    """`ret name(params);` for the first namespace-scope definition of `name` in `src`, None when there
    is none. Raises SplitUnavailable when the definition exists but a declaration of it in another
    unit would not link to it (static, inline, template, `extern "C"`, inside a namespace or class)."""
    code = masked_source(src)
    nested = False
    for m in re.finditer(rf"\b{re.escape(name)}\s*\(", code):
        if code[:m.start()].rstrip().endswith(("::", ".", "->", "~")):
            continue  # a member or qualified name, not our free function
        close = _matching_paren(code, m.end() - 1)
        tail = re.match(r"(\s*noexcept\b)?(\s*->[^{};]*)?\s*\{", code[close + 1:]) if close is not None else None
        if tail is None:
            continue  # a call or a declaration, not the definition
        if code.count("{", 0, m.start()) != code.count("}", 0, m.start()):
            nested = True  # a method, or a function in a namespace: the binding's unqualified name is not it
            continue
        start = max(code.rfind(c, 0, m.start()) for c in ";{}\x00") + 1
        prefix = re.sub(r"\b__host__\b", " ", code[start:m.start()]).strip()
        if not prefix or NOT_DECLARABLE.search(prefix):
            raise SplitUnavailable(f"bound function {name!r} cannot be declared in the binding unit "
                                   f"({' '.join(prefix.split()) or 'no return type'})")
        decl = _strip_comments(src[start:close + 1 + tail.end() - 1])
        decl = re.sub(r"\b__host__\b", " ", decl)
        return " ".join(decl.split()) + ";"
    if nested:
        raise SplitUnavailable(f"bound function {name!r} is defined only inside a namespace or class")
    return None


def bound_function_declarations(functions: Any, sources: Iterable[str]) -> str:
    """Forward declarations of every bound function, taken from its definition in `sources`, after the
    sources' namespace-scope `using` of torch/std names: the split scheme's binding unit is compiled
    apart from the units that define them."""
    sources = list(sources)
    out = []
    for code in map(masked_source, sources):
        out += [" ".join(m.group(0).split()) for m in USING_HEADER_NAMES.finditer(code)
                if code.count("{", 0, m.start()) == code.count("}", 0, m.start())]
    out = list(dict.fromkeys(out))
    for name in _function_names(functions):
        decl = next((d for s in sources if (d := function_declaration(name, s))), None)
        if decl is None:
            raise SplitUnavailable(f"no definition of bound function {name!r} found in the sources")
        out.append(decl)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------ lean scheme
# The host side of a launch in a host-compiler unit. `k<<<g, b, s, st>>>(args)` is rewritten to
# `amdkv_launch(k, g, b, s, st)(args)`: each argument is converted to the kernel's parameter type by
# copy-initialisation (what the `<<<>>>` call does), and the kernel is launched with cudaLaunchKernel
# on the host stub nvcc emitted for it in the device unit (the address CUDA registers the kernel
# under). hipLaunchKernelGGL expands to the same. Not part of the PCH: it follows it.
LEAN_LAUNCH = r"""
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#include <cstddef>
#include <tuple>
#include <utility>
namespace amdkv_lean {
template <class T> T pass(T v) { return v; }
template <class... P> struct Launch {
  void (*kernel)(P...);
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  template <class... A> void operator()(A&&... a) const {
    static_assert(sizeof...(A) == sizeof...(P), "amdkv lean build: a launch with another number of arguments");
    call(std::index_sequence_for<P...>{}, std::forward<A>(a)...);
  }
  template <std::size_t... I, class... A> void call(std::index_sequence<I...>, A&&... a) const {
    std::tuple<P...> values(pass<P>(std::forward<A>(a))...);
    void* args[] = {(void*)&std::get<I>(values)..., nullptr};
    cudaLaunchKernel((const void*)kernel, grid, block, args, shmem, stream);
  }
};
template <class... P> Launch<P...> launch(void (*k)(P...), dim3 g, dim3 b, size_t s, cudaStream_t st) {
  return Launch<P...>{k, g, b, s, st};
}
}  // namespace amdkv_lean
#undef hipLaunchKernelGGL
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  amdkv_lean::launch(kernel, (grid), (block), (shmem), amdkv_hip_stream(stream))(__VA_ARGS__)
"""
# the device unit launches nothing: torch's current stream (c10 headers) is not needed there
LEAN_DEVICE_FLAGS = ["-UAMDKV_HIP_TORCH_STREAM"]
DEVICE_VARIABLE = re.compile(r"\b(__constant__|__managed__)\b")
# macros nvcc defines for its host pass and a host compiler does not: host code that tests them could
# take another branch when g++ compiles it, so such a source is not built lean
NVCC_MACRO = re.compile(r"\b__(?:CUDACC|NVCC)\w*")
INLINE_WORDS = re.compile(r"\b(inline|__inline__|__forceinline__|static|constexpr|template)\b")


def _callee_start(code: str, end: int) -> int | None:
    """Start of the kernel expression that ends at `end` (exclusive) before a `<<<`: a possibly
    qualified name, with template arguments (`k`, `ns::k`, `k<float, 4>`); None for anything else."""
    i = end
    while i > 0 and code[i - 1].isspace():
        i -= 1
    if i > 0 and code[i - 1] == ">":  # template arguments: back to the matching '<'
        depth, i = 0, i - 1
        while i >= 0:
            depth += {">": 1, "<": -1}.get(code[i], 0)
            if depth == 0:
                break
            i -= 1
        if i < 0:
            return None
    m = re.search(r"(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*\s*$", code[:i])
    return m.start() if m else None


def _rewrite_ggl(text: str, kernel_expr: Callable[[str], str]) -> str:
    """`hipLaunchKernelGGL(K, g, b, s, st, args...)` -> `amdkv_lean::launch(kernel_expr(K), (g), (b), (s),
    amdkv_hip_stream(st))(args...)`, K unwrapped from `HIP_KERNEL_NAME(...)` (a template-id's commas
    need it). A call the scan cannot take apart is left to the macro LEAN_LAUNCH defines."""
    code = _mask_comments_strings(text)
    out, pos = [], 0
    for m in re.finditer(r"\bhipLaunchKernelGGL\s*\(", code):
        close = _matching_paren(code, m.end() - 1)
        if m.start() < pos or close is None:
            continue
        args = _split_top_level(text[m.end():close])
        if len(args) < 5:
            continue
        kernel = args[0].strip()
        wrapped = re.fullmatch(r"HIP_KERNEL_NAME\s*\((.*)\)", kernel, re.S)
        callee = " ".join((wrapped.group(1) if wrapped else kernel).split())
        g, b, shm, st = (a.strip() for a in args[1:5])
        out += [text[pos:m.start()], f"amdkv_lean::launch({kernel_expr(callee)}, ({g}), ({b}), ({shm}), "
                                     f"amdkv_hip_stream({st}))({','.join(args[5:])})"]
        pos = close + 1
    return "".join(out) + text[pos:]


def rewrite_launches(text: str, kernel_expr: Callable[[str], str] = lambda callee: callee) -> tuple[str, list[str]]:
    """`k<<<g, b, s, st>>>(` -> `amdkv_lean::launch(K, g, b, s, st)(` and `hipLaunchKernelGGL(k, g, b,
    s, st, ...)` likewise, for every launch in `text` (comments and literals skipped), K =
    `kernel_expr(k)`; returns the text and the `<<<>>>` callees as written. Raises SplitUnavailable
    for a launch whose kernel is not a name or a template-id."""
    text = _rewrite_ggl(text, kernel_expr)
    code = _mask_comments_strings(text)
    out, callees, pos = [], [], 0
    for m in re.finditer(r"<<<(.*?)>>>\s*\(", code, re.S):
        start = _callee_start(code, m.start())
        if start is None or start < pos:
            raise SplitUnavailable("a kernel launch the rewrite does not recognise (the kernel is an expression)")
        callee = " ".join(text[start:m.start()].split())
        callees.append(callee)
        out += [text[pos:start], f"amdkv_lean::launch({kernel_expr(callee)}, {text[m.start(1):m.end(1)]})("]
        pos = m.end()
    return "".join(out) + text[pos:], callees


def _type_aliases(code: str) -> dict[str, str]:
    """`typedef T name;` / `using name = T;` anywhere in `code` (masked), torch-free and defined once:
    name -> T. The device unit's getters name a launched template-id at file scope, where an alias
    local to the launching function (`typedef __hip_bfloat16 bf;`) is not visible; its type is."""
    seen: dict[str, set[str]] = {}
    for m in re.finditer(r"\btypedef\s+([^;{}()]+?)\s+(\w+)\s*;|\busing\s+(\w+)\s*=\s*([^;{}]+?)\s*;", code):
        name, target = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        seen.setdefault(name, set()).add(" ".join(target.split()))
    return {n: next(iter(t)) for n, t in seen.items() if len(t) == 1 and not TORCH_WORDS.search(next(iter(t)))}


def _resolve_aliases(callee: str, aliases: dict[str, str]) -> str:
    """`callee`'s template arguments with each alias replaced by its type (aliases of aliases too)."""
    head, sep, args = callee.partition("<")
    for _ in range(4):
        new = re.sub(r"\b\w+\b", lambda m: aliases.get(m.group(0), m.group(0)), args)
        if new == args:
            break
        args = new
    return head + sep + args


def _is_kernel(item: Any) -> bool:
    return "__global__" in item.header


def _device_only(item: Any) -> bool:
    return "__device__" in item.header and "__host__" not in item.header and not _is_kernel(item)


def lean_parts(body: str) -> tuple[str, str, tuple[str, ...]]:
    """(device part, host part, names the host part needs from the device part: kernels and the
    getters of template instantiations) of one source for the lean scheme, blanked, not cut
    (compiler line numbers stay the candidate's; a host part that launches template kernels gains
    one first line of getter declarations).

    Device part: everything but host functions, torch includes and torch-using declarations (nvcc
    compiles it against the CUDA runtime alone). Host part: everything but device-only functions,
    with each kernel's body turned into `;` (its declaration) and each `<<<>>>` launch rewritten to
    `amdkv_launch(...)(...)`; a template kernel launched as a template-id is instantiated in the
    device part by an exported getter of its address (appended after the source), which the launch
    calls. Raises SplitUnavailable
    for what cannot be split soundly: device variables (host code names them by address), static
    kernels and anonymous namespaces (internal linkage: the host unit could not reach them), nvcc's
    own macros (`__CUDACC__`: g++ compiles the host part and would take the other branch), non-inline
    `__host__ __device__` functions (defined in both units), device-library headers, a launch whose
    kernel is an expression, a template kernel launched without template arguments. What it lets
    through and does not compile (a template argument naming a torch type or a local) fails the
    build, which then falls back to the next scheme; the symbol check catches a kernel the device
    unit does not export."""
    body = route_launches_to_current_stream(body)  # every launch in the 4-argument form
    if DEVICE_HEADER.search(body):
        raise SplitUnavailable("a device-library header (cub, thrust, rocprim, cooperative groups)")
    code = _mask_comments_strings(body)
    if DEVICE_VARIABLE.search(code):
        raise SplitUnavailable("a __constant__/__managed__ variable (host code would address it)")
    if NVCC_MACRO.search(code):
        raise SplitUnavailable("the source tests an nvcc macro (__CUDACC__/__NVCC__), which the host compiler "
                               "of the lean host unit does not define")
    kernels = tuple(sorted(global_kernel_names(body)))
    if not kernels:
        raise SplitUnavailable("no __global__ kernel in a unit with device code")
    templated = {k for k in kernels if is_template_kernel(body, k)}
    if re.search(r"\bnamespace\s*\{", code):
        raise SplitUnavailable("an anonymous namespace (its kernels and functions are internal to each unit)")
    items = top_level_items(body)
    for it in items:
        if _is_kernel(it) and re.search(r"\bstatic\b", it.header):
            raise SplitUnavailable("a static kernel (internal to the unit that defines it)")
        if it.kind == "decl" and "__device__" in it.header and "(" not in it.header:
            raise SplitUnavailable("a __device__ variable (host code would address it)")
        if it.is_function and "__host__" in it.header and "__device__" in it.header \
                and not INLINE_WORDS.search(it.header):
            raise SplitUnavailable("a non-inline __host__ __device__ function (defined in both units)")
    device = device_part(body, items, every_host_function=True)[0]
    host = list(body)
    for it in items:
        if _is_kernel(it) and it.kind == "block":  # the definition becomes a declaration
            host[it.body_start:it.end] = list(";" + _blank(body[it.body_start + 1:it.end]))
        elif _device_only(it):
            host[it.start:it.end] = list(_blank(body[it.start:it.end]))
    # A template kernel is instantiated where it is launched, and nvcc keeps the host stub of an
    # instantiation local to its unit: the device unit instantiates each launched template-id in an
    # exported getter of its stub's address, and the launch calls the getter, cast to the kernel's type.
    getters: dict[str, str] = {}
    aliases = _type_aliases(code)

    def kernel_expr(callee: str) -> str:
        if re.sub(r"<.*", "", callee).split("::")[-1].strip() not in templated:
            return callee
        if "<" not in callee:
            raise SplitUnavailable(f"template kernel {callee!r} launched without its template arguments")
        getter = "amdkv_lean_kernel_" + hashlib.sha256(callee.encode()).hexdigest()[:12]
        getters[getter] = _resolve_aliases(callee, aliases)
        return f"reinterpret_cast<decltype(&{callee})>({getter}())"

    host_text, _ = rewrite_launches("".join(host), kernel_expr)
    if getters:
        device += "\n" + "".join(f'extern "C" void* {g}() {{ return (void*)&{c}; }}\n' for g, c in getters.items())
        host_text = "".join(f'extern "C" void* {g}();' for g in getters) + "\n" + host_text
    return device, host_text, kernels + tuple(getters)


def _lean_device_unit(stem: str, body: str, flags: list[str]) -> tuple[Unit, str, tuple[str, ...]]:
    """(the device unit, the host part, the kernel names) of one source with device code (lean)."""
    device, host, kernels = lean_parts(body)
    return Unit(f"{stem}_kernels.cu", HIP_PRELUDE + device, [*flags, *LEAN_DEVICE_FLAGS]), host, kernels


def _lean_host_unit(name: str, parts: list[str], flags: list[str], kernels: tuple[str, ...], tail: str = "") -> Unit:
    """One host unit for host parts that compile together (the launch helper once, the binding last)."""
    return Unit(name, HOST_PRELUDE + LEAN_LAUNCH + "\n".join(parts) + tail, flags, "host", kernels)


# ------------------------------------------------------------------------------------ units
def _needs_device_compiler(text: str) -> bool:
    return bool(DEVICE_CODE.search(text) or DEVICE_HEADER.search(text))


def _light(body: str) -> tuple[str, str]:
    """(torch header, body) of a split-scheme device unit: `<torch/types.h>` (nvcc on it takes ~30 s
    instead of ~75 s for `<torch/extension.h>` + pybind11), also in place of the candidate's own
    `#include <torch/extension.h>`; a unit with its own PYBIND11_MODULE keeps the full header."""
    if PYBIND_MODULE.search(body):
        return FULL_HEADER, body
    return LIGHT_HEADER, EXTENSION_INCLUDE.sub(LIGHT_HEADER.strip(), body)


def _inline_units(capture: dict[str, Any], platform: str, scheme: str) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    cpp = "\n".join(capture.get("cpp_sources", []))
    cuda = "\n".join(capture.get("cuda_sources", []))
    functions = capture.get("functions")
    cflags = safe_flags(capture.get("extra_cflags", []))[0]
    cuda_flags = safe_flags(capture.get("extra_cuda_cflags", []))[0]
    units: list[Unit] = []
    if scheme == "full":
        units.append(Unit(f"main{ext}", FULL_HEADER + prelude + cpp + _binding(functions), cflags))
    elif scheme == "lean":
        return _lean_inline_units(cpp, cuda, functions, cflags, cuda_flags)
    elif not _needs_device_compiler(cpp):  # declarations (cuda_sources style) or host code: the binding stays with them
        units.append(Unit("main.cpp", HOST_PRELUDE + cpp + _binding(functions), cflags, "host"))
    else:  # split, KernelBench style: kernels and launchers with <torch/types.h>; binding apart
        header, body = _light(cpp)
        units.append(Unit("main.cu", header + prelude + body, cflags))
        if functions:
            decls = bound_function_declarations(functions, [cpp, cuda])
            units.append(Unit("binding.cpp", HOST_PRELUDE + decls + _binding(functions), cflags, "host",
                              tuple(_function_names(functions))))
    if cuda.strip():
        header, body = _light(cuda) if scheme != "full" else (LIGHT_HEADER, cuda)
        units.append(Unit(f"cuda{ext}", header + HIP_PRELUDE + body, cuda_flags))
    return units


def _lean_inline_units(cpp: str, cuda: str, functions: Any, cflags: list[str], cuda_flags: list[str]) -> list[Unit]:
    """Lean scheme of a load_inline call: a torch-free nvcc unit per source with kernels, and one host
    unit with `cpp_sources`' host part, `cuda_sources`' host part (launchers) and the binding (one g++
    run with the precompiled header instead of two: ~12 s each here)."""
    units, host_parts, kernels = [], [], ()
    for stem, body, flags in (("main", cpp, cflags), ("cuda", cuda, cuda_flags)):
        if not body.strip():
            continue
        if not _needs_device_compiler(body):
            host_parts.append(body)
            continue
        dev, host, names = _lean_device_unit(stem, body, flags)
        units.append(dev)
        host_parts.append(host)
        kernels += names
    if not kernels:
        raise SplitUnavailable("no source with device code")
    return [*units, _lean_host_unit("main.cpp", host_parts, cflags, kernels, _binding(functions))]


def _load_units(capture: dict[str, Any], platform: str, scheme: str) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    units = []
    for i, f in enumerate(capture.get("sources", [])):
        text = f.get("text")
        if text is None:
            raise ValueError(f"source {f.get('path')} could not be read: {f.get('error')}")
        is_dev = f.get("path", "").endswith((".cu", ".hip", ".cuh")) or _needs_device_compiler(text)
        flags = safe_flags(capture.get("extra_cuda_cflags" if is_dev else "extra_cflags", []))[0]
        if scheme != "full" and not is_dev:
            units.append(Unit(f"src{i}.cpp", HOST_PRELUDE + text, flags, "host"))
        elif scheme == "lean" and _needs_device_compiler(text):
            dev, host, kernels = _lean_device_unit(f"src{i}", text, flags)
            units += [dev, _lean_host_unit(f"src{i}.cpp", [host], flags, kernels)]
        else:  # `load` sources include torch themselves: only their torch/extension.h is lightened
            body = _light(text)[1] if scheme != "full" else text
            units.append(Unit(f"src{i}{ext}", prelude + body, flags))
    return units


SCHEMES = ("full", "split", "lean")


def extension_units(capture: dict[str, Any], platform: str, scheme: str = "full") -> list[Unit]:
    """The files one captured call compiles.

    `full`: every unit as CUDA/HIP (KernelBench's `cpp_sources` hold `__global__` code);
    `cpp_sources` + the generated binding -> main, `cuda_sources` -> cuda. `split` (platform cuda
    only): units with device code through nvcc with `<torch/types.h>`, and the binding, with forward
    declarations of the bound functions taken from their definitions, in a host unit of its own (or
    with `cpp_sources` when those hold no device code). `lean` (platform cuda only): each source with
    device code becomes a device unit without torch (nvcc) and a host unit with its launchers,
    rewritten to cudaLaunchKernel, and the binding (host compiler, precompiled header); see
    `lean_parts`. Raises SplitUnavailable when the split or lean scheme cannot be set up,
    ValueError for an unreadable `load` source."""
    if scheme not in SCHEMES or (scheme != "full" and platform != "cuda"):
        raise ValueError(f"no build scheme {scheme!r} for platform {platform!r}")
    if capture.get("api") == "load":
        return _load_units(capture, platform, scheme)
    units = _inline_units(capture, platform, scheme)
    if platform == "cuda":
        for u in units:
            u.text = route_launches_to_current_stream(u.text)
    return units


def module_name_for(units: list[Unit], key: str) -> str:
    """The Python module name: the candidate's own `PYBIND11_MODULE(name, ...)` when it hard-codes
    one (its `PyInit_<name>` decides), else a content-derived unique name."""
    for u in units:
        for m in PYBIND_MODULE.finditer(u.text):
            if m.group(1) != "TORCH_EXTENSION_NAME":
                return m.group(1)
    return f"amdkv_hip_{key[:16]}"
