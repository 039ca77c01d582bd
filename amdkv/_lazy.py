"""Lazy package exports (PEP 562), shared by the packages whose names must not load their heavy
modules at `import` time (`amdkv.verify`: no torch or triton; `amdkv.data`: no datasets).

    __getattr__, __dir__ = lazy_exports(__name__, {"Name": "package.module", ...})
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`: each name is imported from its module on first
    use and then kept in the package's namespace."""
    names = sorted(exports)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__
