"""Resolve suite specs (`builtin:all`, `builtin:rocm`, `builtin:train`, `procedural:train?n=5000`,
a folder, a file) to tasks.

`builtin:<name>` is a bundled suite folder; `builtin:train` / `builtin:eval` are the bundled
split (DESIGN.md section 4: eval tasks are never trained on). Filters narrow a listing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from amdkv.errors import BadInputError
from amdkv.tasks import builtin
from amdkv.tasks.loader import load_task, load_task_dir
from amdkv.tasks.types import Task
from amdkv.tasks.versions import builtin_suite_version, suite_version  # noqa: F401  - re-exported

SPLITS = ("train", "eval")


def load_builtin(suite: str | None = None) -> list[Task]:
    tasks = []
    for path in builtin.task_files(suite):
        tasks.append(load_task(path, suite=path.parent.name))
    _assign_splits(tasks)
    return tasks


def _assign_splits(tasks: list[Task]) -> None:
    """Tasks without an explicit split get one from amdkv.tasks.split (deterministic)."""
    from amdkv.tasks.split import assign_splits

    assign_splits(tasks)


# Suite spec prefixes that live in their own modules: "prefix" -> "module:function", where the
# function takes the part after "prefix:" and returns the tasks (imported only when used). One line
# per loader, so loaders of generated or external suites plug in without touching load_suite.
SUITE_LOADERS: dict[str, str] = {
    "kernelbench": "amdkv.tasks.external.kernelbench:load",
    "pytorch2hip": "amdkv.tasks.external.pytorch2hip:load",
    "tritonbench-g": "amdkv.tasks.external.tritonbench:load",
    "rocmbench": "amdkv.tasks.external.rocmbench:load",
    # procedural:<split>[?n=..&seed=..] (docs/procedural_tasks.md)
    "procedural": "amdkv.tasks.procedural:load_split",
}


def load_suite(spec: str) -> list[Task]:
    """Tasks named by `spec`; raises BadInputError listing what is available."""
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in SUITE_LOADERS:
        import importlib

        module, func = SUITE_LOADERS[prefix].split(":")
        return getattr(importlib.import_module(module), func)(rest)
    if spec.startswith("builtin:"):
        name = spec.split(":", 1)[1]
        if name in ("all", ""):
            return load_builtin()
        if name in SPLITS:
            return [t for t in load_builtin() if t.split == name]
        if name.startswith("level") and name[5:].isdigit():
            return [t for t in load_builtin() if t.level == int(name[5:])]
        if name in builtin.suite_names():
            return load_builtin(name)
        raise BadInputError(f"unknown builtin suite {spec!r}",
                            hint=f"use builtin:all, builtin:train, builtin:eval, builtin:levelN or one of "
                                 f"{['builtin:' + s for s in builtin.suite_names()]}")
    path = Path(spec)
    if path.is_dir():
        return load_task_dir(path)
    if path.is_file():
        return [load_task(path)]
    raise BadInputError(f"{spec!r} is neither a builtin or procedural suite nor a task file or folder",
                        hint="pass builtin:all, procedural:train?n=1000, a folder of task files, one task file, or one of "
                             + ", ".join(f"{p}:..." for p in sorted(SUITE_LOADERS)))


def select_ids(tasks: list[Task], task_ids: Iterable[str], spec: str) -> list[Task]:
    """The tasks of `spec` (already loaded as `tasks`) whose ids are in `task_ids`, in suite order.
    An id the suite lacks is a BadInputError that says where it is when it is a bundled task of
    another split or suite (`l1_bmm` is in builtin:eval, not builtin:train), else the closest ids."""
    import difflib

    wanted = list(dict.fromkeys(task_ids))
    known = {t.id for t in tasks}
    unknown = [i for i in wanted if i not in known]
    if unknown:
        bundled = {t.id: t for t in load_builtin()} if any(builtin.task_path(i) for i in unknown) else {}
        elsewhere = {i: f"builtin:{bundled[i].split or bundled[i].suite}" for i in unknown if i in bundled}
        if elsewhere:
            hint = "; ".join(f"{i} is in {where}" for i, where in elsewhere.items()) + \
                   " (builtin:all holds every bundled task)"
        else:
            close = sorted({c for i in unknown for c in difflib.get_close_matches(i, sorted(known), n=3, cutoff=0.6)})
            hint = (f"did you mean {', '.join(close)}? " if close else "") + f"`amdkv tasks list --from '{spec}'` lists them"
        raise BadInputError(f"unknown task id(s) {unknown} in {spec}", hint=hint)
    return [t for t in tasks if t.id in set(wanted)]


def filter_tasks(tasks: Iterable[Task], *, suite: str | None = None, split: str | None = None,
                 level: int | None = None, op_family: str | None = None, dtype: str | None = None) -> list[Task]:
    out = []
    for t in tasks:
        if suite and t.suite != suite:
            continue
        if split and t.split != split:
            continue
        if level is not None and t.level != level:
            continue
        if op_family and t.op_family != op_family:
            continue
        if dtype and dtype not in t.dtypes:
            continue
        out.append(t)
    return out
