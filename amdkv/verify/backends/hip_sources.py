"""Turn captured `load_inline`/`load` calls into HIP translation units, and split out device code.

What torch would compile (ROCm build of torch, as far as a compile for resources is concerned):
`cpp_sources` become `main.cpp` after `#include <torch/extension.h>` (compiled with `CXX`, i.e.
hipcc in KernelBench's HIP style), `cuda_sources` become `cuda.cu` after `#include <torch/types.h>`
and the HIP runtime header.

`device_only_source` is the fast path: torch/ATen/c10/pybind11 includes are dropped, and so are
top-level host functions and declarations that use torch (`torch::`, `at::`, `TORCH_CHECK`, ...)
and the `PYBIND11_MODULE` block. Kernels, device helpers, structs, templates and torch-free host
code stay. Removed text is blanked (newlines kept), so compiler line numbers still match the
candidate's source. It is only trusted when it compiles and every `__global__` kernel of the
source shows up in the resource remarks (a template kernel instantiated only by removed host
code would not); otherwise the caller compiles the full unit with torch's headers (precompiled).
"""

from __future__ import annotations

import dataclasses
import re

TORCH_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](torch|ATen|c10|pybind11|caffe2)/[^>"]*[>"].*$', re.M)
TORCH_WORDS = re.compile(r"\b(torch|at|c10|py|pybind11)::|\bTORCH_\w+|\bAT_\w+|\bC10_\w+|\bTensor\b|"
                         r"\bPYBIND11_\w+|\bCHECK_(CUDA|HIP|INPUT|CONTIGUOUS)\b")
SAFE_FLAG = re.compile(r"^(-D\w+(=\S*)?|-U\w+|-std=c\+\+\d+|-ffast-math|-fno-fast-math|"
                       r"-munsafe-fp-atomics|-ffp-contract=\w+|-fgpu-flush-denormals-to-zero|-w|-Wall)$")
GLOBAL_NAME = re.compile(r"__global__[^;{(]*?\b(\w+)\s*\(", re.S)


@dataclasses.dataclass
class TranslationUnit:
    """One source file torch would compile for an extension."""

    name: str            # e.g. "relu_ext/main.cpp"
    source: str
    flags: list[str]
    torch_headers: bool  # needs torch's headers (includes torch/ATen/c10)
    has_device_code: bool


def safe_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(flags passed to hipcc, flags dropped). Host-only, link and path flags are dropped, and so are
    -O levels: every unit is compiled at -O3 (resources at one optimisation level; one PCH)."""
    keep, drop = [], []
    for f in flags:
        f = "-ffast-math" if f in ("--use_fast_math", "-use_fast_math") else f
        (keep if SAFE_FLAG.match(f) else drop).append(f)
    return keep, drop


def _has_device_code(src: str) -> bool:
    return bool(re.search(r"__global__|__device__|hipLaunchKernelGGL|<<<", src))


def translation_units(capture: dict) -> list[TranslationUnit]:
    """The units one captured call compiles (empty sources are skipped)."""
    name = capture.get("name", "ext")
    units: list[TranslationUnit] = []
    if capture.get("api") == "load":
        for f in capture.get("sources", []):
            text = f.get("text") or ""
            is_cuda = f.get("path", "").endswith((".cu", ".hip", ".cuh"))
            flags = capture.get("extra_cuda_cflags" if is_cuda else "extra_cflags", [])
            units.append(TranslationUnit(f"{name}/{f.get('path', '?').rsplit('/', 1)[-1]}", text,
                                         safe_flags(flags)[0], bool(TORCH_INCLUDE.search(text)),
                                         _has_device_code(text)))
        return units
    cpp = "\n".join(capture.get("cpp_sources", []))
    if cpp.strip():
        text = "#include <torch/extension.h>\n" + cpp
        units.append(TranslationUnit(f"{name}/main.cpp", text, safe_flags(capture.get("extra_cflags", []))[0],
                                     True, _has_device_code(cpp)))
    cuda = "\n".join(capture.get("cuda_sources", []))
    if cuda.strip():
        text = "#include <torch/types.h>\n#include <hip/hip_runtime.h>\n" + cuda
        units.append(TranslationUnit(f"{name}/cuda.cu", text, safe_flags(capture.get("extra_cuda_cflags", []))[0],
                                     True, _has_device_code(cuda)))
    return units


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _mask_comments_strings(src: str) -> str:
    """Same length as `src`, with comments and string/char literals replaced by spaces."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(_blank(src[i:j]))
        i = j
    return "".join(out)


PREPROCESSOR = re.compile(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", re.M)
SCOPE_HEADER = re.compile(r"\s*(namespace\b[^{]*|extern\s*)$")


@dataclasses.dataclass
class TopItem:
    """One namespace-scope item of a C++/HIP source (namespace and `extern "C"` blocks are entered,
    their items listed as if at file scope; preprocessor lines are not items).

    `kind`: "decl" (ends with `;`) or "block" (a braced definition: function, type, module, ...).
    `start`/`end`: its span in the source, a block's trailing `;` included. `header`: the masked text
    before its `{` (a block) or the whole masked declaration. `body`: a block's masked `{...}`."""

    kind: str
    start: int
    end: int
    header: str
    body: str = ""
    body_start: int = 0   # index of a block's `{`

    @property
    def is_device(self) -> bool:
        return "__global__" in self.header or "__device__" in self.header

    @property
    def is_type(self) -> bool:
        return self.kind == "block" and re.search(r"\b(struct|class|union|enum)\b[^(]*$", self.header) is not None

    @property
    def is_module(self) -> bool:
        return re.search(r"\b(PYBIND11_MODULE|TORCH_LIBRARY\w*)\b", self.header) is not None

    @property
    def is_function(self) -> bool:
        return self.kind == "block" and "(" in self.header and not self.is_type

    @property
    def uses_torch(self) -> bool:
        return bool(TORCH_WORDS.search(self.header) or TORCH_WORDS.search(self.body))


def masked_source(src: str) -> str:
    """Same length as `src`: comments and literals blanked, preprocessor lines turned into NUL."""
    return PREPROCESSOR.sub(lambda m: "\x00" * len(m.group(0)), _mask_comments_strings(src))


def top_level_items(src: str) -> list[TopItem]:
    """The namespace-scope items of `src`, in order (see TopItem)."""
    masked = masked_source(src)
    items: list[TopItem] = []
    item_start, i, n = 0, 0, len(masked)
    while i < n:
        c = masked[i]
        if c == "\x00":
            item_start = i + 1
        elif c == ";":
            items.append(TopItem("decl", item_start, i + 1, masked[item_start:i + 1]))
            item_start = i + 1
        elif c == "{":
            header = masked[item_start:i]
            if SCOPE_HEADER.match(header):  # namespace / extern "C": its items are listed too
                item_start = i + 1
            else:
                d, j = 1, i + 1
                while j < n and d:
                    d += {"{": 1, "}": -1}.get(masked[j], 0)
                    j += 1
                end = j + 1 if j < n and masked[j] == ";" else j
                items.append(TopItem("block", item_start, end, header, masked[i:j], i))
                i = item_start = end
                continue
        elif c == "}":  # the end of an entered namespace / extern block
            item_start = i + 1
        i += 1
    return items


def blank_spans(src: str, spans: list[tuple[int, int]]) -> str:
    """`src` with each [start, end) span blanked (newlines kept, so line numbers still match)."""
    out = list(src)
    for a, b in spans:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def device_part(src: str, items: list[TopItem], *, every_host_function: bool = False) -> tuple[str, int]:
    """(`src` with torch includes, torch-using declarations, `PYBIND11_MODULE`/`TORCH_LIBRARY` blocks
    and torch-using host functions blanked, number of items blanked); `items`: top_level_items(src).
    `every_host_function`: torch-free host functions too (the lean build's device unit, whose host
    functions are compiled in the host unit instead)."""
    spans = [(it.start, it.end) for it in items
             if (it.kind == "decl" and TORCH_WORDS.search(it.header) and not it.is_device)
             or (it.kind == "block" and it.is_module)
             or (it.is_function and not it.is_device and (every_host_function or it.uses_torch))]
    return blank_spans(TORCH_INCLUDE.sub(lambda m: _blank(m.group(0)), src), spans), len(spans)


def device_only_source(src: str) -> tuple[str, int]:
    """(source with torch-using host code blanked out, number of pieces removed)."""
    return device_part(src, top_level_items(src))


def global_kernel_names(src: str) -> set[str]:
    """Names of `__global__` functions defined or declared in `src` (comments ignored)."""
    masked = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", _mask_comments_strings(src))
    return set(GLOBAL_NAME.findall(masked))


def is_template_kernel(src: str, name: str) -> bool:
    masked = _mask_comments_strings(src)
    return re.search(r"template\s*<[^{;]*?>\s*__global__[^;{(]*?\b" + re.escape(name) + r"\s*\(", masked, re.S) \
        is not None
