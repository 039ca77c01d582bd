"""Parse clang's `-Rpass-analysis=kernel-resource-usage` remarks into `ArchResources`.

Why remarks: with `--cuda-device-only -c` they come out of the one device compile that also
checks the code (no extra tool such as `llvm-readobj` on the code object), for every kernel,
with the same fields in hipcc 5.2 (clang 15) and 7.0 (clang 21).
"""

from __future__ import annotations

import re
import shutil
import subprocess

from amdkv.archs import ArchResources, lds_limit

_TAG = "[-Rpass-analysis=kernel-resource-usage]"
_LINE = re.compile(r"remark:\s*(.*?)\s*\[-Rpass-analysis=kernel-resource-usage\]")
_FIELDS = {
    "SGPRs": "sgpr", "TotalSGPRs": "sgpr", "VGPRs": "vgpr", "AGPRs": "agpr",
    "ScratchSize [bytes/lane]": "scratch_bytes", "Occupancy [waves/SIMD]": "occupancy",
    "SGPRs Spill": "sgpr_spill", "VGPRs Spill": "vgpr_spill", "LDS Size [bytes/block]": "lds_bytes",
}


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable names via the host's `c++filt` (identity when it is missing)."""
    out = {n: n for n in names}
    exe = shutil.which("c++filt")
    if not exe or not names:
        return out
    try:
        res = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True, timeout=10)
        lines = res.stdout.splitlines()
        if len(lines) == len(names):
            out = dict(zip(names, lines))
    except (OSError, subprocess.SubprocessError):  # no demangler: mangled names stay as they are
        pass
    return out


def short_name(demangled: str) -> str:
    """`void ns::add<float>(float*, int)` -> `ns::add<float>` (what a person calls the kernel)."""
    head = demangled.split("(", 1)[0].strip()
    return head.split(" ")[-1] if " " in head and "<" not in head else head.removeprefix("void ").strip()


def parse_resource_remarks(stderr: str, arch: str) -> list[ArchResources]:
    """One `ArchResources` per `Function Name:` remark, in the order clang printed them."""
    kernels: list[tuple[str, dict[str, int]]] = []
    for line in stderr.splitlines():
        if _TAG not in line:
            continue
        m = _LINE.search(line)
        if not m:
            continue
        key, _, value = m.group(1).partition(":")
        key, value = key.strip(), value.strip()
        if key == "Function Name":
            kernels.append((value, {}))
        elif kernels and key in _FIELDS:
            try:
                kernels[-1][1][_FIELDS[key]] = int(value)
            except ValueError:  # a non-numeric remark value: that field stays unknown (None)
                pass
    names = demangle([k for k, _ in kernels])
    limit = lds_limit(arch)
    out = []
    for mangled, fields in kernels:
        res = ArchResources(arch=arch, kernel=short_name(names[mangled]), compiled=True, lds_limit=limit,
                            config={"mangled": mangled}, **fields)
        if limit is not None and res.lds_bytes is not None and res.lds_bytes > limit:
            res.error = f"LDS {res.lds_bytes} B exceeds {arch} limit {limit} B"
        out.append(res)
    return out
