"""Procedural tasks: thousands of tasks composed from a grammar of ops, each with a templated
Triton solution (and HIP where the template allows), held-out compositions for generalisation.

`load_suite("procedural:train?n=5000&seed=0")` (amdkv.tasks.suites) materialises and loads them;
docs/procedural_tasks.md describes the grammar, the held-out rule and the checks.
Imports only the standard library at import time (torch is imported by the task files).
"""

from __future__ import annotations

from pathlib import Path

from amdkv.tasks.procedural.materialise import generator_version, suite_root, task_file, write_split
from amdkv.tasks.procedural.sampler import TaskSpec, iter_tasks
from amdkv.tasks.procedural.spec import ProceduralSpec, parse

__all__ = ["ProceduralSpec", "TaskSpec", "generator_version", "load_procedural", "parse", "suite_paths",
           "suite_root", "suite_specs", "task_file", "write_split"]


def suite_paths(spec: str | ProceduralSpec) -> list[Path]:
    """Task files of a spec (materialised if needed), train before heldout, in index order."""
    ps = parse(spec) if isinstance(spec, str) else spec
    paths: list[Path] = []
    for split, n in ps.counts().items():
        paths += write_split(ps.seed, split, n)
    return paths


def suite_specs(spec: str | ProceduralSpec) -> list[TaskSpec]:
    """What determines each task of a spec (composition, dtype, cases), drawn without touching files:
    for choosing samples without loading thousands of task files."""
    ps = parse(spec) if isinstance(spec, str) else spec
    return [t for split, n in ps.counts().items() for t in iter_tasks(ps.seed, split, n)]


def load_procedural(spec: str) -> list:
    """The Tasks of a procedural spec (each carries its split and suite version in METADATA)."""
    from amdkv.tasks.loader import load_task

    return [load_task(p, suite="procedural") for p in suite_paths(spec)]


def load_split(rest: str) -> list:
    """SUITE_LOADERS entry: `rest` is the spec after "procedural:" (e.g. "train?n=1000")."""
    return load_procedural(f"procedural:{rest}")
