"""Turn one captured `load_inline`/`load` call into the compilation units of a build scheme.

Pure text work, no compiler: the units' sources (headers, the generated `PYBIND11_MODULE`, launches
routed to torch's current stream), which unit goes to which compiler, and for the split scheme the
forward declarations of the bound functions that let the binding unit compile apart from the device
code. Kept apart from compiling (hip_build) so it can be tested, and reasoned about, without nvcc.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import Any

from amdkv.verify.backends.hip_sources import _mask_comments_strings, safe_flags

PYBIND_MODULE = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)")
DEVICE_CODE = re.compile(r"__global__|__device__|hipLaunchKernelGGL|<<<")
# headers whose templates launch kernels: a unit including them needs nvcc even without `__global__`
DEVICE_HEADER = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](hipcub|cub|thrust|rocprim|cooperative_groups)\b'
                           r'|^[ \t]*#[ \t]*include[ \t]*[<"]hip/hip_cooperative_groups\.h', re.M)
LAUNCH = re.compile(r"<<<(.*?)>>>", re.S)
EXTENSION_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/extension\.h[>"][^\n]*$', re.M)
PREPROCESSOR_LINE = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
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
    kind: str = "device"            # "device": nvcc/hipcc | "host": the host C++ compiler (split scheme)
    binds: tuple[str, ...] = ()     # bound functions this unit only declares (checked after compiling)


# ------------------------------------------------------------------------------------ declarations
def _code_only(src: str) -> str:
    """Same length as `src`: comments and literals blanked, preprocessor lines turned into NUL
    (a statement boundary for the declaration scan)."""
    return PREPROCESSOR_LINE.sub(lambda m: "\x00" * len(m.group(0)), _mask_comments_strings(src))


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
    code = _code_only(src)
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
    for code in map(_code_only, sources):
        out += [" ".join(m.group(0).split()) for m in USING_HEADER_NAMES.finditer(code)
                if code.count("{", 0, m.start()) == code.count("}", 0, m.start())]
    out = list(dict.fromkeys(out))
    for name in _function_names(functions):
        decl = next((d for s in sources if (d := function_declaration(name, s))), None)
        if decl is None:
            raise SplitUnavailable(f"no definition of bound function {name!r} found in the sources")
        out.append(decl)
    return "\n".join(out) + "\n"


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


def _inline_units(capture: dict[str, Any], platform: str, split: bool) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    cpp = "\n".join(capture.get("cpp_sources", []))
    cuda = "\n".join(capture.get("cuda_sources", []))
    functions = capture.get("functions")
    cflags = safe_flags(capture.get("extra_cflags", []))[0]
    units: list[Unit] = []
    if not split:
        units.append(Unit(f"main{ext}", FULL_HEADER + prelude + cpp + _binding(functions), cflags))
    elif _needs_device_compiler(cpp):  # KernelBench style: kernels in cpp_sources; binding apart
        header, body = _light(cpp)
        units.append(Unit("main.cu", header + prelude + body, cflags))
        if functions:
            decls = bound_function_declarations(functions, [cpp, cuda])
            units.append(Unit("binding.cpp", HOST_PRELUDE + decls + _binding(functions), cflags, "host",
                              tuple(_function_names(functions))))
    else:  # declarations (cuda_sources style) or host code: the binding stays with them
        units.append(Unit("main.cpp", HOST_PRELUDE + cpp + _binding(functions), cflags, "host"))
    if cuda.strip():
        header, body = _light(cuda) if split else (LIGHT_HEADER, cuda)
        units.append(Unit(f"cuda{ext}", header + HIP_PRELUDE + body,
                          safe_flags(capture.get("extra_cuda_cflags", []))[0]))
    return units


def _load_units(capture: dict[str, Any], platform: str, split: bool) -> list[Unit]:
    ext = ".cu" if platform == "cuda" else ".hip"
    prelude = HIP_PRELUDE if platform == "cuda" else ""
    units = []
    for i, f in enumerate(capture.get("sources", [])):
        text = f.get("text")
        if text is None:
            raise ValueError(f"source {f.get('path')} could not be read: {f.get('error')}")
        is_dev = f.get("path", "").endswith((".cu", ".hip", ".cuh")) or _needs_device_compiler(text)
        flags = safe_flags(capture.get("extra_cuda_cflags" if is_dev else "extra_cflags", []))[0]
        if split and not is_dev:
            units.append(Unit(f"src{i}.cpp", HOST_PRELUDE + text, flags, "host"))
        else:  # `load` sources include torch themselves: only their torch/extension.h is lightened
            body = _light(text)[1] if split else text
            units.append(Unit(f"src{i}{ext}", prelude + body, flags))
    return units


def extension_units(capture: dict[str, Any], platform: str, scheme: str = "full") -> list[Unit]:
    """The files one captured call compiles.

    `full`: every unit as CUDA/HIP (KernelBench's `cpp_sources` hold `__global__` code);
    `cpp_sources` + the generated binding -> main, `cuda_sources` -> cuda. `split` (platform cuda
    only): units with device code through nvcc with `<torch/types.h>`, and the binding, with forward
    declarations of the bound functions taken from their definitions, in a host unit of its own (or
    with `cpp_sources` when those hold no device code). Raises SplitUnavailable when the split
    cannot be set up, ValueError for an unreadable `load` source."""
    if scheme not in ("full", "split") or (scheme == "split" and platform != "cuda"):
        raise ValueError(f"no build scheme {scheme!r} for platform {platform!r}")
    split = scheme == "split"
    if capture.get("api") == "load":
        return _load_units(capture, platform, split)
    units = _inline_units(capture, platform, split)
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
