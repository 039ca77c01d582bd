"""Inside the candidate's sandboxed worker: hand HIP candidates their prebuilt extensions.

The trusted parent captured the candidate's `load_inline`/`load` calls and built them
(backends/hip_build.py). Here, before the candidate is imported, both functions are replaced by
ones that load the prebuilt `.so` for the call with the same extension name (in call order) and
return a proxy whose functions count as kernel launches of the candidate's language: forward must
call into the extension (the verifier's `no_kernel_launch` check). The op recorder is *not* paused
while the extension runs, so aten compute issued by the extension's C++ host code (`at::matmul`
inside the binding) is recorded as PyTorch compute, like Python-side fallbacks.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from typing import Any, Callable

from amdkv.verify.worker_protocol import HipPrebuilt


class HipBuildMissing(ImportError):
    """The candidate asked for an extension the parent did not build (different name or count)."""


class HipExtension:
    """What `load_inline` returns to the candidate: the module's attributes, callables counted."""

    def __init__(self, name: str, module: Any, counter: Any) -> None:
        object.__setattr__(self, "_amdkv_name", name)
        object.__setattr__(self, "_amdkv_module", module)
        object.__setattr__(self, "_amdkv_counter", counter)

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._amdkv_module, attr)
        if callable(value) and not attr.startswith("__"):
            return _counted(value, f"hip:{self._amdkv_name}.{attr}", self._amdkv_counter)
        return value

    def __dir__(self) -> list[str]:
        return dir(self._amdkv_module)


def _counted(fn: Callable[..., Any], label: str, counter: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        counter.kernels[label] = counter.kernels.get(label, 0) + 1
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", label)
    call.__doc__ = getattr(fn, "__doc__", None)
    return call


def _load_so(module_name: str, so_path: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(module_name, so_path)
    spec = importlib.util.spec_from_file_location(module_name, so_path, loader=loader)
    if spec is None:
        raise HipBuildMissing(f"cannot load the built extension {so_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module


def install_prebuilt(builds: list[HipPrebuilt], counter: Any) -> None:
    """Patch `torch.utils.cpp_extension.load_inline`/`load` to return the parent's builds (the
    candidate job's `BackendJobPart.hip_prebuilt`, in the order the capture saw the calls)."""
    import torch.utils.cpp_extension as ce

    pending = list(builds)
    loaded: dict[str, Any] = {}

    def take(name: Any, *args: Any, **kwargs: Any) -> HipExtension:
        name = str(name)
        entry = next((b for b in pending if b.name == name), None)
        if entry is None:
            if name in loaded:  # the same extension asked for twice (e.g. in __init__ per instance)
                return HipExtension(name, loaded[name], counter)
            raise HipBuildMissing(f"extension {name!r} was not captured before the run (captured: "
                                  f"{[b.name for b in builds]}); build extensions at import or in __init__ "
                                  "with a fixed name")
        pending.remove(entry)
        module = _load_so(entry.module_name, entry.so_path)
        loaded[name] = module
        return HipExtension(name, module, counter)

    ce.load_inline = take
    ce.load = take
