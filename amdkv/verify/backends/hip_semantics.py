"""Static semantics guard for HIP sources judged on NVIDIA (platform `cuda`).

HIP code written for CDNA runs with 64-lane wavefronts; through the compatibility layer on NVIDIA
it runs with 32-lane warps. Code that hard-codes 64 lanes compiles silently there and computes
something else, so a run on NVIDIA says nothing about it: such candidates are `unverifiable` (the
reason names the rule), never `ok` and never `mismatch`. The same holds for AMD-only builtins
(which fail to compile under nvcc, but the honest verdict is "cannot judge here", not "wrong") and
FNUZ fp8 (mapped to OCP types here, so the arithmetic differs).

Rules work on the source with comments and string literals masked (hip_sources), so commented-out
code never trips them. Code that asks for the wavefront size (`warpSize`) passes: the lane maths
rules fire only on the literal 64 family, and only where the code uses cross-lane operations
(shuffles, votes), which is where the wavefront size changes the meaning. Measured false-positive
and false-negative rates on tests/data/hip_semantics are in docs/hip.md.
"""

from __future__ import annotations

import dataclasses
import re

from amdkv.verify.backends.hip_sources import _mask_comments_strings

WAVE64 = "wave64_dependent"
AMD_ONLY = "amd_only_builtin"
FP8_FNUZ = "fp8_fnuz"

CROSS_LANE = re.compile(r"\b(__shfl\w*|__ballot\w*|__any\w*|__all\w*|__lane_id|__activemask|__reduce_\w+)\s*\(")


@dataclasses.dataclass(frozen=True)
class SemanticsFinding:
    code: str        # wave64_dependent | amd_only_builtin | fp8_fnuz (the verdict's reason)
    rule: str        # which rule fired (for measuring and for the message)
    line: int
    snippet: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.code} ({self.rule}): {self.snippet}"


# (code, rule name, pattern, needs cross-lane ops in the source)
RULES: list[tuple[str, str, re.Pattern[str], bool]] = [
    (AMD_ONLY, "amdgcn_builtin", re.compile(r"\b__builtin_amdgcn_\w+"), False),
    (AMD_ONLY, "mfma_intrinsic", re.compile(r"\b\w*mfma\w*\s*\(", re.I), False),
    (AMD_ONLY, "unsafe_atomic", re.compile(r"\bunsafeAtomic(Add|Max|Min)\b"), False),
    (AMD_ONLY, "gcn_arch_name", re.compile(r"\bgcnArchName\b"), False),
    (AMD_ONLY, "amd_device_libs", re.compile(r"\b__(ockl|ocml|llvm_amdgcn)_\w+"), False),
    (AMD_ONLY, "amd_wavefront_macro", re.compile(r"\b__AMDGCN_WAVEFRONT_SIZE\w*\b"), False),
    (AMD_ONLY, "amdgcn_inline_asm", re.compile(r"\basm\b[^;]*?\(\s*\"\s*[sv]_\w+", re.S), False),
    (FP8_FNUZ, "fnuz_type", re.compile(r"\b\w*fp8\w*_fnuz\b|\bfnuz\w*\b", re.I), False),
    (WAVE64, "define_wave64", re.compile(r"^[ \t]*#[ \t]*define[ \t]+\w*(WARP|WAVE)\w*[ \t]+\(?[ \t]*64[ \t]*\)?[ \t]*$",
                                         re.M | re.I), False),
    (WAVE64, "const_wave64", re.compile(r"\b\w*(warp|wave|wf)_?(size|width|len|lanes)\w*\s*(=|\{)\s*64\b", re.I), False),
    (WAVE64, "tiled_partition_64", re.compile(r"tiled_partition\s*<\s*64\s*>"), False),
    (WAVE64, "shfl_width_64", re.compile(r"\b__shfl\w*\s*\([^;()]*(\([^;()]*\)[^;()]*)*,\s*64\s*\)"), False),
    (WAVE64, "shfl_offset_32", re.compile(r"\b__shfl_(down|xor|up)\w*\s*\([^;()]*(\([^;()]*\)[^;()]*)*,\s*32\s*[,)]"), False),
    (WAVE64, "shfl_tree_from_32", re.compile(
        r"\bfor\s*\(\s*(?:unsigned\s+|int\s+|auto\s+)?\w+\s*=\s*32\s*;[^;]*;[^)]*(>>=\s*1|/=\s*2|>>\s*1|/\s*2)\s*\)"
        r"[^;]{0,200}?__shfl", re.S), False),
    (WAVE64, "ballot_mask_64", re.compile(r"0x[fF]{16}(?:[uUlL]*)\b|~\s*0[uU]?[lL][lL]\b|~\s*0[lL][lL][uU]?\b|"
                                          r"~\s*(?:uint64_t|unsigned\s+long\s+long)\s*\(\s*0\s*\)|"
                                          r"__popcll\s*\([^;]*__ballot[^;]*\)\s*==\s*64|1[uU]?[lL][lL]\s*<<\s*6[0-3]\b"), True),
    (WAVE64, "lane_math_64", re.compile(r"\b(threadIdx\.[xyz]|tid\w*|lane\w*|thread_?id\w*|t)\s*(%\s*64|&\s*(63|0x3[fF]))\b"),
     True),
    (WAVE64, "wave_id_64", re.compile(r"\b(threadIdx\.[xyz]|tid\w*|thread_?id\w*)\s*(/\s*64|>>\s*6)\b"), True),
    (WAVE64, "wave_count_64", re.compile(r"\bblockDim\.[xyz]\s*(/\s*64|>>\s*6)\b"), True),
]


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def analyse(source: str) -> list[SemanticsFinding]:
    """Every rule hit in one HIP source text (empty list: nothing that NVIDIA cannot judge)."""
    masked = _mask_comments_strings(source)
    # inline asm text is a string literal: look for it in the raw source
    cross_lane = bool(CROSS_LANE.search(masked))
    found: list[SemanticsFinding] = []
    seen: set[tuple[str, int]] = set()
    for code, rule, pattern, needs_lanes in RULES:
        if needs_lanes and not cross_lane:
            continue
        text = source if rule == "amdgcn_inline_asm" else masked
        for m in pattern.finditer(text):
            line = _line_of(text, m.start())
            if (rule, line) in seen:
                continue
            seen.add((rule, line))
            snippet = source.splitlines()[line - 1].strip()[:160] if source else ""
            found.append(SemanticsFinding(code, rule, line, snippet))
    return found


def analyse_captures(captures: list[dict]) -> list[SemanticsFinding]:
    """Findings over every source text of the captured `load_inline`/`load` calls."""
    out: list[SemanticsFinding] = []
    for cap in captures:
        texts = cap.get("cpp_sources", []) + cap.get("cuda_sources", []) + \
            [f.get("text") or "" for f in cap.get("sources", [])]
        for t in texts:
            out.extend(analyse(t))
    return out


def verdict_reason(findings: list[SemanticsFinding]) -> str | None:
    """The reason code for an `unverifiable` verdict: AMD-only first, then fp8, then wave64."""
    for code in (AMD_ONLY, FP8_FNUZ, WAVE64):
        if any(f.code == code for f in findings):
            return code
    return None


def explain(findings: list[SemanticsFinding]) -> str:
    head = ("the HIP source depends on AMD hardware semantics the NVIDIA compatibility layer cannot "
            "reproduce (32-lane warps, no AMD builtins, OCP fp8); verify it on platform rocm. To make it "
            "verifiable here, use `warpSize` instead of 64-lane constants:")
    return head + "\n" + "\n".join(f"  {f}" for f in findings[:12])
