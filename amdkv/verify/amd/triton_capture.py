"""Capture, at a real Triton launch, everything needed to recompile that kernel for an AMD target.

`ASTSource` needs the kernel's signature, constexprs and argument specialisation, which exist only
at launch (TOOLCHAINS.md). The verifier's hook calls `capture_launch` from inside the candidate's
process at every launch (GPU JIT or `TRITON_INTERPRET=1` with CPU tensors) and ships the JSON dict
to the trusted side, where `triton_aot.compile_capture_for_arch` rebuilds the compile.

The specialisation is computed with Triton's own binder (`create_function_from_signature`) and the
*HIP* backend's rules, i.e. what an AMD JIT would have applied to these very arguments:
divisibility by 16 of pointers and ints ("D"), pointer ranges within 2 GiB ("S", when buffer ops
are on), ints equal to 1 turned into constexprs, floats and bools never specialised. Fallbacks
keep it working when Triton's internals change (3.6-3.9).
"""

from __future__ import annotations

import inspect
import os
from typing import Any

CAPTURE_VERSION = 1
# Launch keywords that are compile options, not kernel arguments (HIPOptions fields we keep).
OPTION_KEYS = ("num_warps", "num_stages", "num_ctas", "waves_per_eu", "matrix_instr_nonkdim", "kpack",
               "enable_fp_fusion", "launch_cooperative_grid", "schedule_hint", "maxnreg", "num_buffers_warp_spec",
               "instruction_sched_variant", "sanitize_overflow", "arch")


# ---- JSON encoding of constexpr values -------------------------------------------------------------
def encode_value(v: Any) -> Any:
    """JSON form of a constexpr value; dtypes and nested JIT functions get tagged dicts."""
    cls = v.__class__.__name__
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if cls == "constexpr" and hasattr(v, "value"):
        return encode_value(v.value)
    if cls == "dtype" or (hasattr(v, "primitive_bitwidth") and hasattr(v, "name")):
        return {"__triton_dtype__": str(v)}
    if isinstance(v, (tuple, list)):
        return {"__tuple__": [encode_value(x) for x in v]}
    fn = plain_function(v)
    if fn is not None:
        return {"__function__": f"{fn.__module__}:{fn.__qualname__}"}
    if "torch" in type(v).__module__ and cls == "dtype":
        return {"__torch_dtype__": str(v)}
    return {"__repr__": repr(v)}


def decode_value(v: Any, resolve_function=None) -> Any:
    """Inverse of `encode_value` (functions need `resolve_function(module_qualname)`)."""
    if isinstance(v, dict):
        if "__triton_dtype__" in v:
            import triton.language as tl

            return getattr(tl, v["__triton_dtype__"], None) or tl.dtype(v["__triton_dtype__"])
        if "__tuple__" in v:
            return tuple(decode_value(x, resolve_function) for x in v["__tuple__"])
        if "__function__" in v and resolve_function is not None:
            return resolve_function(v["__function__"])
        raise ValueError(f"cannot rebuild constexpr value {v}")
    return v


# ---- unwrapping ----------------------------------------------------------------------------------
def plain_function(obj: Any):
    """The undecorated Python function behind a JITFunction / InterpretedFunction / Autotuner chain."""
    seen = 0
    while obj is not None and seen < 10:
        seen += 1
        if inspect.isfunction(obj):
            return obj
        obj = getattr(obj, "fn", None)
    return None


def unwrap_kernel(kernel: Any) -> tuple[Any, dict[str, Any]]:
    """(innermost JIT/interpreter object, extra kwargs a wrapper would add: autotune best config)."""
    extra: dict[str, Any] = {}
    obj = kernel
    for _ in range(10):
        cls = type(obj).__name__
        if cls == "Autotuner":
            best = getattr(obj, "best_config", None)
            if best is not None and hasattr(best, "all_kwargs"):
                extra = {**best.all_kwargs(), **extra}
        if cls in ("JITFunction", "InterpretedFunction") or not hasattr(obj, "fn"):
            break
        obj = obj.fn
    return obj, extra


def jit_function_for(kernel: Any):
    """A real `triton.runtime.jit.JITFunction` for `kernel` (built fresh under the interpreter)."""
    from triton.runtime.jit import JITFunction

    inner, _ = unwrap_kernel(kernel)
    if isinstance(inner, JITFunction):
        return inner
    fn = plain_function(inner)
    if fn is None:
        raise TypeError(f"not a Triton kernel: {type(kernel).__name__}")
    kw = dict(getattr(inner, "kwargs", {}) or {})
    allowed = set(inspect.signature(JITFunction.__init__).parameters)
    return JITFunction(fn, **{k: v for k, v in kw.items() if k in allowed})


# ---- specialisation --------------------------------------------------------------------------
def _hip_backend():
    from triton.backends.amd.compiler import HIPBackend

    return HIPBackend


def specialization(jf, args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """[(type, spec)] per parameter, as Triton's binder computes it for the HIP backend."""
    call_kwargs = {k: v for k, v in kwargs.items() if k in jf.arg_names}
    backend = _hip_backend()
    try:  # triton 3.3+: the generated binder is the exact code path of a launch
        from triton.runtime.jit import create_function_from_signature

        binder = create_function_from_signature(jf.signature, jf.params, backend)
        _, spec, _ = binder(*args, **call_kwargs)
        return [tuple(s) for s in spec]
    except (ImportError, TypeError, AttributeError):  # other triton versions: the fallback below
        pass
    bound = jf.signature.bind(*args, **call_kwargs)
    bound.apply_defaults()
    out = []
    for kp, (name, value) in zip(jf.params, bound.arguments.items()):
        if kp.is_constexpr:
            out.append(("constexpr", value))
            continue
        try:
            from triton.runtime.jit import native_specialize_impl  # 3.5+

            t, s = native_specialize_impl(backend, value, kp.is_const, not kp.do_not_specialize,
                                          not kp.do_not_specialize_on_alignment)[:2]
        except ImportError:
            from triton.runtime.jit import mangle_type

            t = mangle_type(value)
            s = "D" if (hasattr(value, "data_ptr") and value.data_ptr() % 16 == 0) or \
                (isinstance(value, int) and not isinstance(value, bool) and value % 16 == 0) else ""
            if isinstance(value, int) and not isinstance(value, bool) and value == 1 and not kp.do_not_specialize:
                t, s = "constexpr", 1
        out.append((t, s))
    return out


def capture_launch(kernel: Any, args: tuple, kwargs: dict, grid: Any = None) -> dict | None:
    """JSON-serialisable description of one launch, or None if `kernel` is not a Triton kernel.

    Never raises: a capture failure must not change the candidate's behaviour; the reason is
    returned in `{"error": ...}` so the verifier can report that the AMD compile was skipped.
    """
    try:
        inner, extra = unwrap_kernel(kernel)
        fn = plain_function(inner)
        if fn is None:
            return None
        kwargs = {**extra, **{k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}}
        jf = jit_function_for(inner)
        spec = specialization(jf, tuple(args), kwargs)
        signature: dict[str, str] = {}
        constexprs: dict[str, Any] = {}
        attrs: dict[str, str] = {}
        for name, (t, s) in zip(jf.arg_names, spec):
            signature[name] = t
            if t == "constexpr":
                constexprs[name] = encode_value(s)
            elif isinstance(s, str):
                attrs[name] = s
        options = {k: kwargs[k] for k in OPTION_KEYS if k in kwargs and kwargs[k] is not None}
        config = None
        if extra:
            config = {"config": {k: encode_value(v) for k, v in extra.items()}, "phase": "run"}
        else:
            config = autotuner_config_from_stack()
        try:
            file = inspect.getsourcefile(fn)
        except TypeError:
            file = None
        import triton

        return {
            "capture_version": CAPTURE_VERSION,
            "kernel": fn.__name__,
            "module": fn.__module__,
            "qualname": fn.__qualname__,
            "file": os.path.abspath(file) if file else None,
            "arg_names": list(jf.arg_names),
            "signature": signature,
            "constexprs": constexprs,
            "attrs": attrs,
            "num_warps": options.pop("num_warps", None),
            "num_stages": options.pop("num_stages", None),
            "options": {k: encode_value(v) for k, v in options.items()},
            "autotune_config": config,
            "grid": _grid_json(grid),
            "interpreter": type(inner).__name__ == "InterpretedFunction",
            "triton_version": triton.__version__,
        }
    except Exception as e:  # noqa: BLE001 - see docstring
        return {"error": f"{type(e).__name__}: {e}", "kernel": getattr(plain_function(kernel), "__name__", None)}


def autotuner_config_from_stack(max_depth: int = 12) -> dict | None:
    """The autotune config being launched, when the launch comes from an `Autotuner` up the stack.

    Why the stack: the verifier hooks `JITFunction.run`, below `Autotuner.run`, which passes the
    config's values as plain keyword arguments. The Autotuner's frame holds the `Config` object;
    `phase` is "bench" while it is timing candidates and "run" for the launch it picked.
    """
    import sys

    frame = sys._getframe(1)
    for _ in range(max_depth):
        frame = frame.f_back
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if type(owner).__name__ != "Autotuner":
            continue
        cfg = frame.f_locals.get("config")
        if cfg is None or not hasattr(cfg, "all_kwargs"):
            cfg = getattr(owner, "best_config", None)
        if cfg is None or not hasattr(cfg, "all_kwargs"):
            return {"config": None, "phase": "unknown"}
        phase = "bench" if frame.f_code.co_name in ("_bench", "kernel_call", "benchmark") else "run"
        return {"config": {k: encode_value(v) for k, v in cfg.all_kwargs().items()}, "phase": phase}
    return None


def _grid_json(grid: Any) -> Any:
    if isinstance(grid, (tuple, list)) and all(isinstance(g, int) for g in grid):
        return list(grid)
    return None if grid is None else repr(grid)[:200]


def capture_key(capture: dict) -> str:
    """Identity of a distinct compile: same key, same AMD binary (used to deduplicate launches)."""
    import json

    keep = {k: capture.get(k) for k in ("file", "qualname", "signature", "constexprs", "attrs", "num_warps",
                                        "num_stages", "options")}
    return json.dumps(keep, sort_keys=True, default=str)
