"""Triton launch options of another GPU vendor, dropped where they cannot apply.

Why: kernels written for AMD GPUs (amdkv's target; ROCmBench's `gemm`, `softmax`, `layernorm`, ...:
8 of its 31 files) pass AMD-only compiler options at launch or in autotune configs (`waves_per_eu`,
`matrix_instr_nonkdim`, `kpack`, ...). NVIDIA's Triton refuses any option it does not know
(`KeyError: Keyword argument waves_per_eu was specified but unrecognised`), so on the NVIDIA GPU that
stands in for an MI300X here, such a kernel could not run at all and its task was `unverifiable`.
These options are code-generation hints for AMD's backend (occupancy, MFMA instruction shape, operand
packing); NVIDIA's backend has nothing they could mean. Dropping them on NVIDIA runs the same kernel
the way NVIDIA's Triton would if it ignored unknown options, as its CPU interpreter already does.

Scope: only names that are options of the other backend and not of the running one, and never a name
that is one of the kernel's own parameters. Every worker does it before its job (worker.py), reference and
candidate alike, so both sides of a comparison run alike. The AMD-compile layer still sees the options: launch capture happens in
`runtime_guards.LaunchCounter`, which wraps this wrapper. Verdicts name platform `cuda` as always:
an `ok` there says nothing about how the AMD hints perform.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

_MARK = "_amdkv_drops_foreign_options"


@functools.lru_cache(maxsize=1)
def foreign_options() -> frozenset[str]:
    """Options AMD's Triton backend accepts and NVIDIA's does not (empty where either is missing)."""
    try:
        from triton.backends.amd.compiler import HIPOptions
        from triton.backends.nvidia.compiler import CUDAOptions
    except Exception:  # noqa: BLE001 - a Triton without both backends: nothing to drop
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(HIPOptions)) - \
        frozenset(f.name for f in dataclasses.fields(CUDAOptions))


def dropping_foreign_options(original: Callable[..., Any], names: frozenset[str]) -> Callable[..., Any]:
    """`JITFunction.run` without the launch keywords in `names` that are not the kernel's parameters."""
    def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        found = names.intersection(kwargs)  # usually empty: one set operation per launch
        if found:
            for name in found.difference(getattr(kernel, "arg_names", ()) or ()):
                del kwargs[name]
        return original(kernel, *args, **kwargs)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(run, _MARK, True)
    return run


def drop_amd_options_on_nvidia(device: str, target: Any = None) -> bool:
    """In a worker whose `device` is an NVIDIA GPU (`cuda...` with a CUDA, not a ROCm, torch), make
    Triton's JIT ignore AMD-only launch options (idempotent); True when installed now or before.
    `target`: the class to patch (Triton's JITFunction by default)."""
    import torch

    if not device.startswith("cuda") or torch.version.hip is not None:
        return False
    names = foreign_options()
    if not names:
        return False
    if target is None:
        from triton.runtime.jit import JITFunction as target  # noqa: N813
    if not getattr(target.run, _MARK, False):
        target.run = dropping_foreign_options(target.run, names)
    return True
