"""Checks that run inside the candidate's process while its code executes.

Everything here is a best-effort *witness*: the candidate's process is untrusted, so the
authoritative verdict comes from the parent comparing outputs against references it holds.
These guards catch the honest-but-wrong and the lazy cheats cheaply and give precise reasons:

- `LaunchCounter`    : wraps Triton's launch entry points; forward must launch a kernel.
- `TorchOpRecorder`  : a TorchDispatchMode that records every aten op run by Python code in
                       `forward` outside kernel launches; compute ops there mean the result was
                       (partly) computed by PyTorch, not by the candidate's kernels.
- `FileAccessGuard`  : a `sys.addaudithook` hook (cannot be removed once installed) that
                       refuses `open()` of paths outside an allow-list.
- guard buffers      : inputs live inside larger buffers whose margins hold a byte pattern;
                       an out-of-bounds write near an input changes the pattern.
"""

from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

GUARD_ELEMS = 64          # elements of margin on each side of a guarded input
GUARD_BYTE = 0xA5         # pattern written into the margins

# aten ops that move, allocate, reshape or convert data without computing a task's result.
# Everything else seen in forward (outside kernel launches) is "torch compute".
ALLOWED_ATEN_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "fill_", "zero_", "fill", "scalar_tensor", "arange", "resize_", "set_",
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand", "permute",
    "transpose", "t", "unsqueeze", "squeeze", "flatten", "unflatten", "slice", "select",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "view_as", "expand_as",
    "contiguous", "clone", "copy_", "_to_copy", "to", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "_local_scalar_dense", "item", "is_nonzero", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset", "stride", "size", "numel", "dim", "is_contiguous",
    "view_as_real", "view_as_complex", "_conj", "resolve_conj", "resolve_neg", "movedim",
    "swapaxes", "mT", "_has_compatible_shallow_copy_type", "record_stream", "_copy_from",
    "_pin_memory", "is_pinned", "cat", "stack", "empty_quantized", "set_requires_grad",
    "requires_grad_", "_make_per_tensor_quantized_tensor", "pin_memory",
})


def aten_op_name(func: Any) -> str:
    """'aten::add.Tensor' -> 'add' (the overload packet's base name)."""
    name = getattr(getattr(func, "overloadpacket", func), "__name__", str(func))
    return name.split(".")[0]


class TorchOpRecorder(TorchDispatchMode):
    """Records aten ops run by forward's Python code; paused while a kernel launches."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = 0
        self.compute_ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: D401 - torch API
        if not self.paused:
            name = aten_op_name(func)
            if name not in ALLOWED_ATEN_OPS:
                self.compute_ops[name] = self.compute_ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


class LaunchCounter:
    """Counts Triton launches and pauses the op recorder while they run.

    Patches `JITFunction.run` (GPU JIT, also reached through Autotuner/Heuristics) and, when the
    interpreter is in use, `InterpretedFunction.run`, at class level before candidate import.
    `on_launch(kernel, args, kwargs, grid)` lets the AMD-compile layer capture signatures.
    """

    def __init__(self, on_launch: Callable[[Any, tuple, dict, Any], None] | None = None) -> None:
        self.count = 0
        self.kernels: dict[str, int] = {}
        self.recorder: TorchOpRecorder | None = None
        self.on_launch = on_launch
        self._local = threading.local()

    def install(self) -> None:
        from triton.runtime import jit as tjit
        targets = [tjit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction
            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - every supported triton has it
            pass
        for cls in targets:
            cls.run = self._wrap(cls.run)

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        counter = self

        def run(kernel, *args, grid=None, warmup=False, **kwargs):
            depth = getattr(counter._local, "depth", 0)
            if not warmup and depth == 0:
                counter.count += 1
                name = getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "?")
                counter.kernels[name] = counter.kernels.get(name, 0) + 1
                if counter.on_launch is not None:
                    try:
                        counter.on_launch(kernel, args, kwargs, grid)
                    except Exception:  # capture is best-effort; never change the launch
                        pass
            counter._local.depth = depth + 1
            if counter.recorder is not None:
                counter.recorder.paused += 1
            try:
                return original(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            except BaseException as exc:
                # Lets the worker tell "the kernel program is invalid" from a Python error.
                try:
                    exc._amdkv_in_kernel = True  # type: ignore[attr-defined]
                except AttributeError:
                    pass
                raise
            finally:
                counter._local.depth = depth
                if counter.recorder is not None:
                    counter.recorder.paused -= 1

        run.__wrapped__ = original  # type: ignore[attr-defined]
        return run


class FileAccessGuard:
    """Refuses Python-level `open()` of paths outside the allow-list, and records attempts.

    Installed after torch/triton are imported and the inputs are loaded, right before the
    candidate is imported. Writes are allowed only under `writable` (the worker's temp dir).
    """

    def __init__(self, readable: list[str], writable: list[str]) -> None:
        self.readable = [os.path.realpath(p) for p in readable if p]
        self.writable = [os.path.realpath(p) for p in writable if p]
        self.violations: list[str] = []
        self.enabled = False

    @staticmethod
    def _under(path: str, roots: list[str]) -> bool:
        return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)

    def _hook(self, event: str, args: tuple) -> None:
        if not self.enabled:
            return
        if event == "open":
            path, mode = args[0], args[1]
            if isinstance(path, int) or path is None:
                return
            real = os.path.realpath(os.fsdecode(path))
            writing = isinstance(mode, str) and any(m in mode for m in "wax+")
            if isinstance(mode, int):  # os.open flags
                writing = bool(mode & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            ok = self._under(real, self.writable) or (not writing and self._under(real, self.readable))
            if not ok:
                self.violations.append(f"open({real!r}, {mode!r})")
                raise PermissionError(f"amdkv sandbox: candidate may not open {real}")
        elif event in ("socket.connect", "socket.bind", "subprocess.Popen", "os.system", "os.exec",
                       "os.posix_spawn", "os.spawn", "os.fork", "pty.spawn"):
            self.violations.append(f"{event}{args[:1]!r}")
            raise PermissionError(f"amdkv sandbox: candidate may not use {event}")

    def install(self) -> None:
        sys.addaudithook(self._hook)


def guarded_copy(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Copy `t` (same shape, strides, dtype, device) into the middle of a larger byte buffer.

    Returns (view, raw_buffer, data_byte_span). The margins of `raw_buffer` hold GUARD_BYTE.
    """
    if t.numel() == 0:
        return t.clone(), torch.empty(0, dtype=torch.uint8), 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()))
    item = t.element_size()
    raw = torch.full(((span + 2 * GUARD_ELEMS) * item,), GUARD_BYTE, dtype=torch.uint8, device=t.device)
    typed = raw.view(t.dtype)
    view = typed.as_strided(t.shape, t.stride(), GUARD_ELEMS)
    view.copy_(t)
    return view, raw, span * item


def guards_intact(raw: torch.Tensor, span_bytes: int, item: int) -> bool:
    if raw.numel() == 0:
        return True
    g = GUARD_ELEMS * item
    head, tail = raw[:g], raw[g + span_bytes:]
    return bool((head == GUARD_BYTE).all()) and bool((tail == GUARD_BYTE).all())


@contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Make torch.empty & co. return NaN / max-int filled memory while the block runs.

    An output the candidate allocates but never fully writes then reads as NaN instead of
    whatever an earlier computation left in recycled allocator memory.
    """
    prev_det = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    prev_fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(prev_det, warn_only=prev_warn)
        torch.utils.deterministic.fill_uninitialized_memory = prev_fill
