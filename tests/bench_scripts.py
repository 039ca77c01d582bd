"""Loading a script of `benchmarks/` as a module in a test (the scripts are not a package): one
helper for every test of a benchmark script's parts."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_benchmark_script(name: str, *, module_name: str | None = None, register: bool = False) -> ModuleType:
    """`benchmarks/<name>.py` as a fresh module (`register`: also in sys.modules, for code that
    looks itself up there, e.g. dataclasses)."""
    spec = importlib.util.spec_from_file_location(module_name or name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
