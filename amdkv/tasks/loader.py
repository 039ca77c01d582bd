"""Load KernelBench-format task files (and folders of them) into `Task` objects.

A task file defines `Model`, `get_inputs()`, `get_init_inputs()`, optionally `get_cases()` and
a `METADATA` dict (docs/task_format.md). Loading imports the file, so only load task files
you trust: tasks are reference programs, not candidates (candidates never go through here).
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from amdkv.errors import TaskFormatError
from amdkv.tasks.types import CASE_TAGS, COMPARATORS, CORRECTNESS, PERFORMANCE, Case, Task

_counter = itertools.count()


def import_source_file(path: str | os.PathLike[str], prefix: str) -> ModuleType:
    """Import a Python file under a fresh module name; the file's own exceptions propagate as they are.

    Shared by task loading and by every worker that imports a candidate (its SyntaxError or
    ImportError is a verdict there, not a task-format problem). The module is registered in
    sys.modules because `@triton.jit` needs `inspect` to find the source.
    """
    path = Path(path).resolve()
    name = f"{prefix}_{path.stem}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_file_as_module(path: str | os.PathLike[str], prefix: str = "amdkv_task") -> ModuleType:
    """Import a task file; a missing file, non-Python file or syntax error is a TaskFormatError."""
    path = Path(path).resolve()
    if not path.is_file():
        raise TaskFormatError(f"task file {path} does not exist or is not a file",
                              hint="pass the path of a .py file in KernelBench format")
    try:
        return import_source_file(path, prefix)
    except SyntaxError as exc:
        raise TaskFormatError(f"task file {path} has a syntax error: {exc}",
                              hint="fix the Python syntax") from exc
    except ImportError as exc:
        if "not a Python source file" in str(exc):
            raise TaskFormatError(str(exc), hint="task files must end in .py") from exc
        raise


def _require_callable(module: ModuleType, name: str, path: Path) -> Callable[..., Any]:
    obj = getattr(module, name, None)
    if not callable(obj):
        raise TaskFormatError(f"task file {path} has no function `{name}()`",
                              hint=f"define `def {name}():` returning a list (KernelBench format)")
    return obj


def _cases_from_module(module: ModuleType, path: Path) -> list[Case]:
    get_inputs = _require_callable(module, "get_inputs", path)
    get_init_inputs = _require_callable(module, "get_init_inputs", path)
    raw_cases = getattr(module, "get_cases", None)
    if raw_cases is None:
        # Plain KernelBench file: one case that is both correctness and performance.
        return [Case(name="default", tags=(CORRECTNESS, PERFORMANCE), make_inputs=get_inputs,
                     init_inputs=list(get_init_inputs()))]
    if not callable(raw_cases):
        raise TaskFormatError(f"`get_cases` in {path} is not a function",
                              hint="define `def get_cases(): return [{...}, ...]`")
    cases = []
    seen = set()
    for i, raw in enumerate(raw_cases()):
        if not isinstance(raw, dict):
            raise TaskFormatError(f"get_cases() item {i} in {path} is {type(raw).__name__}, not a dict",
                                  hint="each case is a dict with name, tags, inputs, init_inputs")
        name = str(raw.get("name", f"case{i}"))
        if name in seen:
            raise TaskFormatError(f"duplicate case name {name!r} in {path}", hint="give every case a unique name")
        seen.add(name)
        tags = tuple(raw.get("tags", (CORRECTNESS, PERFORMANCE)))
        bad = [t for t in tags if t not in CASE_TAGS]
        if bad or not tags:
            raise TaskFormatError(f"case {name!r} in {path} has tags {list(tags)}",
                                  hint=f"tags must be a non-empty subset of {list(CASE_TAGS)}")
        inputs = raw.get("inputs", get_inputs)
        make_inputs = inputs if callable(inputs) else (lambda v=inputs: list(v))
        init = raw.get("init_inputs", None)
        init_inputs = list(get_init_inputs() if init is None else (init() if callable(init) else init))
        known = {"name", "tags", "inputs", "init_inputs", "flops", "min_bytes"}
        cases.append(Case(name=name, tags=tags, make_inputs=make_inputs, init_inputs=init_inputs,
                          flops=raw.get("flops"), min_bytes=raw.get("min_bytes"),
                          extra={k: v for k, v in raw.items() if k not in known}))
    if not cases:
        raise TaskFormatError(f"get_cases() in {path} returned no cases", hint="return at least one case")
    return cases


def load_task(path: str | os.PathLike[str], *, suite: str | None = None, task_id: str | None = None) -> Task:
    """Load one task file. Raises `TaskFormatError` naming what is missing."""
    return load_task_and_module(path, suite=suite, task_id=task_id)[0]


def load_task_and_module(path: str | os.PathLike[str], *, suite: str | None = None,
                         task_id: str | None = None) -> tuple[Task, ModuleType]:
    """The Task and the imported module it came from (the reference worker needs `Model`; one
    import serves both, so the task file's module-level code runs once)."""
    path = Path(path).resolve()
    try:
        source = path.read_text()
    except OSError as exc:
        raise TaskFormatError(f"cannot read task file {path}: {exc.strerror}",
                              hint="check the path and its permissions") from exc
    module = import_file_as_module(path)
    model = getattr(module, "Model", None)
    if not isinstance(model, type):
        raise TaskFormatError(f"task file {path} defines no class `Model`",
                              hint="the reference program is `class Model(torch.nn.Module)`")
    meta: dict[str, Any] = dict(getattr(module, "METADATA", {}) or {})
    comparator = meta.get("comparator", "default")
    if comparator not in COMPARATORS:
        raise TaskFormatError(f"task {path} names comparator {comparator!r}",
                              hint=f"use one of {list(COMPARATORS)}")
    level = meta.get("level")
    task = Task(
        id=task_id or meta.get("id") or path.stem,
        path=str(path),
        source=source,
        suite=meta.get("suite") or suite or _bundled_suite(path) or "custom",
        level=int(level) if level is not None else None,
        op_family=meta.get("op_family", "unknown"),
        dtypes=tuple(meta.get("dtypes", ())),
        comparator=comparator,
        tolerance=dict(meta.get("tolerance", {})),
        licence=meta.get("licence", meta.get("license", "unknown")),
        provenance=meta.get("provenance", "unknown"),
        description=meta.get("description", (module.__doc__ or "").strip()),
        split=meta.get("split"),
        cases=_cases_from_module(module, path),
        metadata={**meta, **_builtin_version(path)},
    )
    return task, module


def _bundled_suite(path: Path) -> str | None:
    """A bundled task's suite (its folder) however it was loaded: `amdkv verify` of a bundled file
    by path recorded `custom` before."""
    from amdkv.tasks import builtin

    if builtin.BUILTIN_ROOT not in path.parents or builtin.SOLUTIONS_ROOT in path.parents:
        return None
    return path.parent.name


def _builtin_version(path: Path) -> dict[str, str]:
    """Bundled tasks carry the bundle's suite version however they were loaded."""
    if _bundled_suite(path) is None:
        return {}
    from amdkv.tasks.versions import builtin_suite_version

    return {"suite_version": builtin_suite_version()}


def load_task_dir(folder: str | os.PathLike[str], *, suite: str | None = None) -> list[Task]:
    """Load every `*.py` task file in a folder (not recursive; files starting with `_` skipped)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TaskFormatError(f"{folder} is not a folder of task files", hint="pass a folder of .py task files")
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    return [load_task(p, suite=suite or folder.name) for p in files]
