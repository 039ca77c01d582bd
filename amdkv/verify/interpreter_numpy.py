"""Scalar kernel arguments as loop bounds under Triton 3.6's interpreter with NumPy 2.4 or newer.

The interpreter (`triton/runtime/interpreter.py`) holds every scalar as a one-element array and, in
the `__index__` it patches onto `tl.tensor` (`_patch_lang_tensor`), converts it for `range()` with
`int(array)`. NumPy 2.4 made `int()` of an array with one or more dimensions an error (deprecated
since NumPy 1.25), so every kernel that loops over a scalar argument (`for start in range(0, n_cols,
BLOCK)`: reductions, matmuls, argmax) raised "only 0-dimensional arrays can be converted to Python
scalars", and a correct candidate was `compile_error`/`triton_compile_error`. Found on the H100
image's NumPy 2.5.2 (session 28: the CPU suite's `l1_argmax` test); until then amdkv pinned
`numpy<2.4` (since 2026-11-29), which conflicts with any package that needs a newer NumPy.

`install()` wraps `_patch_lang_tensor` so that `__index__` takes the one element with `.item()`,
which every NumPy version gives, and converts it with `int()` as before (the same value: `int(3.7)`
is what `int(array([3.7]))` was). An array of any other size is converted as before and raises as
before. Nothing else of the interpreter changes. The interpreter's scope restores patched attributes
last-in first-out, so at a launch's end `tl.tensor` gets its own `__index__` back, as without this.
"""

from __future__ import annotations

import functools
import os
from typing import Any


def _scalar_index(self: Any) -> int:
    """`tl.tensor.__index__` under the interpreter: the scalar a one-element array holds."""
    data = self.handle.data
    return int(data.item() if data.size == 1 else data)


def install() -> bool:
    """Route the interpreter's `_patch_lang_tensor` through `_scalar_index`; False (nothing changed)
    when this Triton has no `_patch_lang_tensor` or it is wrapped already."""
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_amdkv_scalar_index", False):
        return False

    @functools.wraps(original)
    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _scalar_index)

    patch_lang_tensor._amdkv_scalar_index = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def install_if_interpreting() -> bool:
    """install() where Triton interprets (TRITON_INTERPRET=1, which Triton itself reads): candidates,
    references (a benchmark's Triton reference loops over its scalars as a candidate does) and the
    procedural checks call this at their start. False where nothing was changed."""
    return os.environ.get("TRITON_INTERPRET") == "1" and install()
