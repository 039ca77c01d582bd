"""Device-function calls under the Triton interpreter without re-patching `triton.language`.

The interpreter (triton 3.6, `triton/runtime/interpreter.py`) runs a launch by patching the
language modules the kernel's globals name (`tl`, `tl.core`: every builtin, `tl.math`, the tensor
class) with interpreted versions (`_patch_lang`), running every program instance, and restoring them.
A `@triton.jit` helper called from a kernel is an `InterpretedFunction` whose `__call__` runs
`_patch_lang` again on *every call, in every program instance*, and never restores what it patched:
it re-sets the same attributes to equivalent functions bound to the same global builder. Profiled on
the bundled Triton solutions (CPU platform, py-spy, session 9): that re-patching
(`inspect.getmembers` over the language modules) was ~26 % of a candidate worker's CPU time.

Triton's own `tl.sum`, `tl.max`, `tl.sigmoid`... are such helpers (`@jit` functions of
`triton.language.standard`, whose globals name `triton.language.core`).

This module skips a helper's re-patch when every language module the helper's globals name has
already been patched since the running launch began (the same module objects: patching is per
module, not per function), and runs it otherwise. What the helper executes is then the same interpreted functions,
so results, errors and the memory-access checks (`interpreter_bounds.py`, which hooks the
interpreter's memory operations, not the language) are unchanged. Installed only in workers that
interpret (`worker_jobs.run_candidate_job`), and only when the interpreter has the names it relies
on (`_patch_lang`, `_LangPatchScope`, `GridExecutor.__call__`); otherwise nothing is changed.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable


class _LaunchState:
    """Which language modules have been patched since the running launch began: by the launch
    itself (restored at its end) or by a helper (Triton never restores those, so they stay patched
    for the rest of the launch). Empty at each launch's start, so the first call of every helper in
    a launch patches as Triton does. The interpreter runs one launch at a time (it patches modules
    process-wide), so one state serves the process."""

    def __init__(self) -> None:
        self.depth = 0
        self.patched: frozenset[int] = frozenset()


def install() -> bool:
    """Route the interpreter's `_patch_lang` through the skip rule above; False (nothing changed)
    when this Triton's interpreter lacks a name the rule needs."""
    import triton.language as tl
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    original = getattr(interpreter, "_patch_lang", None)
    scope_cls = getattr(interpreter, "_LangPatchScope", None)
    if executor is None or original is None or scope_cls is None or getattr(original, "_amdkv_skip", False):
        return False
    state = _LaunchState()

    def language_modules(fn: Any) -> frozenset[int]:
        """The modules `_patch_lang(fn)` patches: by the interpreter's own rule, those of `tl` and
        `tl.core` that `fn`'s globals hold."""
        return frozenset(id(v) for v in getattr(fn, "__globals__", {}).values()
                         if inspect.ismodule(v) and (v is tl or v is tl.core))

    def patch_lang(fn: Any) -> Any:
        langs = language_modules(fn)
        if state.depth and langs <= state.patched:
            return scope_cls()  # already patched in the running launch: nothing to set or restore
        scope = original(fn)
        if state.depth:
            state.patched |= langs  # the launch's own patch, or a helper's (which is never restored)
        return scope

    patch_lang._amdkv_skip = True  # type: ignore[attr-defined]
    interpreter._patch_lang = patch_lang
    executor.__call__ = _counting_launches(executor.__call__, state)
    return True


def _counting_launches(original: Callable[..., Any], state: _LaunchState) -> Callable[..., Any]:
    def __call__(executor: Any, *args: Any, **kwargs: Any) -> Any:
        outer = state.patched
        state.depth += 1
        state.patched = frozenset()
        try:
            return original(executor, *args, **kwargs)
        finally:
            state.depth -= 1
            state.patched = outer

    return __call__
