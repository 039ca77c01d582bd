"""Bounds checking of every memory access a Triton kernel makes under the CPU interpreter.

Why: the interpreter runs a launch's programs one after another on host memory. A store past the
end of a buffer lands silently in whatever lies there (the next row of the same output, the heap
behind it) and a load past the end reads it; the programs that run later often overwrite the damage,
so the outputs can still compare equal. On a GPU the same kernel races with its neighbours or
faults. Without this check, "interpreter-verified" would include kernels that are wrong on every GPU.

What it refuses: for the launch in progress, every tensor argument spans the bytes a correct kernel
could touch through it, computed from the tensor exactly as passed (data_ptr, shape, strides,
element size: from its lowest to its highest element, gaps of a strided view included). Every load,
store and atomic must touch, on each lane whose mask is true, only bytes inside the union of those
spans. Lanes whose mask is false never count (the interpreter computes their addresses too). The
first refused access of a call is kept in `InterpreterBoundsChecker.violation` and raised as
`OutOfBoundsAccess` before the memory is touched; the worker reports it as
`runtime_error`/`out_of_bounds_access` whether or not the exception reaches it.

How: in every supported Triton (3.6-3.9, read from their sources) the interpreter performs each
memory access through four functions of its C helper module `triton._C.libtriton.interpreter`
(`load`, `store`, `atomic_rmw`, `atomic_cas`), which `triton.runtime.interpreter` reaches through
its module global `_interpreter`: block pointers, tensor descriptors, scalar and masked accesses
all end there. The checker replaces that global with a proxy that checks and then forwards. The
spans of a launch come from `GridExecutor._init_args_hst`, which turns the launch's arguments into
the host tensors whose `data_ptr()` the kernel's pointers start from; `GridExecutor.__call__`
delimits the launch. A missing hook fails the installation loudly instead of checking nothing.

Not seen (by design of the definition): an access inside the span of some argument, even one the
kernel had no business touching (a row overrun into the next row of the same output, a write into
an input); reads and writes that race between programs (the interpreter runs them in order).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import numpy as np

ACCESS_LOAD, ACCESS_STORE, ACCESS_ATOMIC = "load", "store", "atomic"
# how each access kind reads in a message ("kernel `k` stored ...")
_VERB = {ACCESS_LOAD: "loaded from", ACCESS_STORE: "stored to", ACCESS_ATOMIC: "ran an atomic on"}


class OutOfBoundsAccess(RuntimeError):
    """A kernel touched memory outside every tensor argument of its launch (raised before the
    access happens). A RuntimeError, not a narrow exception: static rules refuse handlers that
    swallow it, and the checker keeps its own record in any case."""


@dataclasses.dataclass(frozen=True)
class ArgSpan:
    """The bytes [lo, hi) one tensor argument of a launch lets a kernel touch."""

    name: str                     # the kernel parameter: `out_ptr`, `ptrs[1]`, `desc.base`
    lo: int
    hi: int
    shape: tuple[int, ...]
    dtype: str

    def describe(self) -> str:
        return f"`{self.name}` (shape {list(self.shape)}, {self.dtype}, {self.hi - self.lo} bytes)"


def tensor_byte_span(t: Any) -> tuple[int, int] | None:
    """[lo, hi) in bytes of a tensor's elements as the tensor describes them, or None when it has
    none. Strides may be zero (expanded views) or, in principle, negative; storage beyond the
    view (a slice's parent, padding) is not part of it."""
    if t.numel() == 0:
        return None
    size = t.element_size()
    low = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)
    high = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    base = t.data_ptr()
    return base + low * size, base + (high + 1) * size


def argument_spans(named_args: Iterable[tuple[str, Any]]) -> list[ArgSpan]:
    """Spans of every tensor among a launch's arguments, the way the interpreter turns them into
    pointers: tensors, `triton.reinterpret` wrappers (their base tensor), tuples of arguments and
    host `TensorDescriptor`s (their base tensor). Other objects that merely have a `data_ptr`
    get no span: the kernel may not touch memory through them."""
    import torch

    spans: list[ArgSpan] = []

    def visit(name: str, arg: Any) -> None:
        if isinstance(arg, tuple):
            for i, item in enumerate(arg):
                visit(f"{name}[{i}]", item)
            return
        base = getattr(arg, "base", None)
        if isinstance(base, torch.Tensor) and not isinstance(arg, torch.Tensor):
            visit(f"{name}.base" if hasattr(arg, "block_shape") else name, base)  # descriptor / wrapper
            return
        if isinstance(arg, torch.Tensor):
            span = tensor_byte_span(arg)
            if span is not None:
                spans.append(ArgSpan(name, span[0], span[1], tuple(arg.shape),
                                     str(arg.dtype).replace("torch.", "")))

    for name, arg in named_args:
        visit(name, arg)
    return spans


@dataclasses.dataclass
class Violation:
    """The first refused access of a call, with what a kernel author needs to fix it."""

    kernel: str
    access: str
    address: int
    itemsize: int
    bad_lanes: int
    active_lanes: int
    program_id: tuple[int, ...] | None
    spans: list[ArgSpan]

    def nearest(self) -> tuple[ArgSpan, str, int] | None:
        """(span, 'past the end of' | 'before the start of', bytes outside) of the closest span."""
        best = None
        for s in self.spans:
            if self.address < s.lo:
                where, gap = "before the start of", s.lo - self.address
            else:
                where, gap = "past the end of", self.address + self.itemsize - s.hi
            if best is None or gap < best[2]:
                best = (s, where, gap)
        return best

    @property
    def message(self) -> str:
        pid = f" in program {self.program_id}" if self.program_id is not None else ""
        head = (f"kernel `{self.kernel}` {_VERB[self.access]} memory outside every tensor argument"
                f"{pid}: {self.bad_lanes} of {self.active_lanes} active lane(s) out of bounds")
        near = self.nearest()
        if near is None:
            where = "; the launch passed no tensor with elements (or the access ran outside a launch)"
        else:
            span, side, gap = near
            offset = self.address - span.lo
            at = (f"element offset {offset // self.itemsize}" if offset % self.itemsize == 0
                  else f"byte offset {offset}")
            where = (f"; the first is at {at} from `{span.name}` ({self.itemsize}-byte elements), "
                     f"{-(-gap // self.itemsize)} element(s) {side} it: {span.describe()} is the nearest "
                     "argument")
        return (head + where + ". Mask the access (`mask=offs < n`; `boundary_check=` for a block pointer) "
                "or fix its offsets: on a GPU it would touch another buffer or fault.")


@dataclasses.dataclass
class _Launch:
    kernel: str
    spans: list[ArgSpan] = dataclasses.field(default_factory=list)
    _union: tuple[np.ndarray, np.ndarray] | None = None

    def union(self) -> tuple[np.ndarray, np.ndarray]:
        """Sorted starts and ends of the merged spans (touching or overlapping spans merge)."""
        if self._union is None:
            merged: list[list[int]] = []
            for s in sorted(self.spans, key=lambda s: s.lo):
                if merged and s.lo <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], s.hi)
                else:
                    merged.append([s.lo, s.hi])
            self._union = (np.array([m[0] for m in merged], dtype=np.uint64),
                           np.array([m[1] for m in merged], dtype=np.uint64))
        return self._union


class InterpreterBoundsChecker:
    """Refuses out-of-bounds loads, stores and atomics of interpreted Triton kernels (see module
    docstring). One per worker process, installed before the candidate is imported."""

    def __init__(self) -> None:
        self._launches: list[_Launch] = []
        self.violation: Violation | None = None   # first refused access since reset()
        self._grid_idx: Callable[[], Any] = lambda: None

    def reset(self) -> None:
        self.violation = None

    # ------------------------------------------------------------------ launches
    def begin_launch(self, kernel: str) -> None:
        self._launches.append(_Launch(kernel))

    def set_arguments(self, named_args: Iterable[tuple[str, Any]]) -> None:
        if self._launches:
            self._launches[-1].spans = argument_spans(named_args)
            self._launches[-1]._union = None

    def end_launch(self) -> None:
        if self._launches:
            self._launches.pop()

    # ------------------------------------------------------------------ accesses
    def check(self, access: str, ptrs: Any, mask: Any, itemsize: int) -> None:
        """Raise OutOfBoundsAccess unless every active lane's `itemsize` bytes at `ptrs` lie
        inside the union of the current launch's spans. `mask` None means every lane is active."""
        p = np.asarray(ptrs)
        if mask is None:
            active = p.reshape(-1)
        else:
            m = np.asarray(mask)
            if m.shape != p.shape:
                p, m = np.broadcast_arrays(p, m)
            active = p[m.astype(bool, copy=False)]  # one pass; cheaper than testing m.all() first
        if active.size == 0:
            return
        active = active.astype(np.uint64, copy=False)
        launch = self._launches[-1] if self._launches else None
        if launch is not None:
            # fast path: the whole access lies inside one argument (nearly every access)
            lo, hi = int(active.min()), int(active.max()) + itemsize
            for s in launch.spans:
                if s.lo <= lo and hi <= s.hi:
                    return
            starts, ends = launch.union()
            if starts.size:
                at = np.searchsorted(starts, active, side="right") - 1
                inside = (at >= 0) & (active <= ends[np.maximum(at, 0)] - np.uint64(itemsize))
                if inside.all():
                    return  # spread over several arguments, each lane inside one
                outside = ~inside
            else:
                outside = np.ones(active.shape, dtype=bool)
        else:
            outside = np.ones(active.shape, dtype=bool)
        self._refuse(access, launch, active, outside, itemsize)

    def _refuse(self, access: str, launch: _Launch | None, active: np.ndarray, outside: np.ndarray,
                itemsize: int) -> None:
        grid_idx = self._grid_idx()
        violation = Violation(
            kernel=launch.kernel if launch else "?", access=access,
            address=int(active[np.argmax(outside)]), itemsize=int(itemsize),
            bad_lanes=int(outside.sum()), active_lanes=int(active.size),
            program_id=tuple(int(i) for i in grid_idx) if grid_idx is not None else None,
            spans=list(launch.spans) if launch else [])
        if self.violation is None:
            self.violation = violation
        raise OutOfBoundsAccess(violation.message)

    # ------------------------------------------------------------------ installation
    def install(self) -> None:
        """Route the interpreter's memory accesses and launches through this checker. Raises
        RuntimeError, naming the Triton version, when the interpreter lacks a hook: a verifier
        that silently stopped checking would be worse than one that refuses to start."""
        import triton
        from triton.runtime import interpreter

        executor = getattr(interpreter, "GridExecutor", None)
        missing = [name for name, ok in (
            ("_interpreter", all(hasattr(getattr(interpreter, "_interpreter", None), f)
                                 for f in ("load", "store", "atomic_rmw", "atomic_cas"))),
            ("GridExecutor.__call__", executor is not None),
            ("GridExecutor._init_args_hst", hasattr(executor, "_init_args_hst")),
        ) if not ok]
        if missing:
            raise RuntimeError(f"triton {triton.__version__}: the interpreter has no {', '.join(missing)}, so "
                               "amdkv cannot check its memory accesses (supported: triton 3.6-3.9)")
        builder = getattr(interpreter, "interpreter_builder", None)
        self._grid_idx = lambda: getattr(builder, "grid_idx", None)
        interpreter._interpreter = _checked_memory_ops(interpreter._interpreter, self)
        executor.__call__ = self._wrap_call(executor.__call__)
        executor._init_args_hst = self._wrap_init_args(executor._init_args_hst)

    def _wrap_call(self, original: Callable[..., Any]) -> Callable[..., Any]:
        checker = self

        def __call__(executor: Any, *args: Any, **kwargs: Any) -> Any:
            checker.begin_launch(getattr(executor.fn, "__name__", "?"))
            try:
                return original(executor, *args, **kwargs)
            finally:
                checker.end_launch()

        return __call__

    def _wrap_init_args(self, original: Callable[..., Any]) -> Callable[..., Any]:
        checker = self

        def _init_args_hst(executor: Any, args_dev: Any, kwargs: Any) -> Any:
            args_hst, kwargs_hst = original(executor, args_dev, kwargs)
            names = list(getattr(executor, "arg_names", []))
            positional = [(names[i] if i < len(names) else f"arg{i}", a) for i, a in enumerate(args_hst)]
            checker.set_arguments(positional + list(kwargs_hst.items()))
            return args_hst, kwargs_hst

        return _init_args_hst


def _checked_memory_ops(ops: Any, checker: InterpreterBoundsChecker) -> Any:
    """A stand-in for the interpreter's C helper module: its four memory functions check first;
    every other attribute (enums, fma helpers) is the module's own. The real module lives only in
    this closure, not in an attribute a candidate could read."""

    def itemsize(values: Any) -> int:
        return np.asarray(values).dtype.itemsize

    class CheckedMemoryOps:
        __slots__ = ()

        def __getattr__(self, name: str) -> Any:
            return getattr(ops, name)

        def load(self, ptrs: Any, mask: Any, other: Any, dtype: Any) -> Any:
            checker.check(ACCESS_LOAD, ptrs, mask, np.dtype(dtype).itemsize)
            return ops.load(ptrs, mask, other, dtype)

        def store(self, ptrs: Any, value: Any, mask: Any) -> Any:
            checker.check(ACCESS_STORE, ptrs, mask, itemsize(value))
            return ops.store(ptrs, value, mask)

        def atomic_rmw(self, op: Any, ptrs: Any, value: Any, mask: Any, sem: Any) -> Any:
            checker.check(ACCESS_ATOMIC, ptrs, mask, itemsize(value))
            return ops.atomic_rmw(op, ptrs, value, mask, sem)

        def atomic_cas(self, ptrs: Any, cmp: Any, value: Any, sem: Any) -> Any:
            checker.check(ACCESS_ATOMIC, ptrs, None, itemsize(value))
            return ops.atomic_cas(ptrs, cmp, value, sem)

    return CheckedMemoryOps()
