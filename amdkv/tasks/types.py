"""Plain data types for tasks and their cases (DESIGN.md section 1).

A `Task` is a PyTorch reference program in KernelBench format plus cases and metadata.
A `Case` is one shape/dtype configuration, tagged `correctness` and/or `performance`:
correctness cases are small enough for the Triton CPU interpreter; performance cases are
sized so that a kernel runs well past launch overhead.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable

CORRECTNESS = "correctness"
PERFORMANCE = "performance"
CASE_TAGS = (CORRECTNESS, PERFORMANCE)

# Comparators a task may name (amdkv.verify.compare implements them).
COMPARATORS = ("default", "exact", "argmax", "topk", "sort", "scalar")


def source_sha256(source: str) -> str:
    """Full sha256 of any program text (candidates, task files): the identity verdict caches, records
    and the isolated task loader key on. Here, at the bottom of the import graph, so that tasks and
    verify share it without importing each other (verify.candidate re-exports it)."""
    return hashlib.sha256(source.encode("utf-8", errors="surrogatepass")).hexdigest()


def task_source_hash(source: str) -> str:
    """`Task.source_hash` of a task file's text (for text not loaded as a Task, e.g. a request's)."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@dataclasses.dataclass
class Case:
    """One input configuration of a task.

    `make_inputs` is called after the harness seeds torch's RNG, so each seeded trial draws
    fresh inputs; it must build CPU tensors (the harness moves them to the device).
    """

    name: str
    tags: tuple[str, ...]
    make_inputs: Callable[[], list[Any]]
    init_inputs: list[Any] = dataclasses.field(default_factory=list)
    flops: float | None = None
    min_bytes: int | None = None  # None: computed from the tensors (inputs read + outputs written once)
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def is_correctness(self) -> bool:
        return CORRECTNESS in self.tags

    @property
    def is_performance(self) -> bool:
        return PERFORMANCE in self.tags


@dataclasses.dataclass
class Task:
    """A reference program plus its cases and metadata.

    The module object itself is not kept here: processes that need `Model` re-import the
    file from `path`, which keeps Task picklable and cheap to pass around.
    """

    id: str
    path: str
    source: str
    suite: str = "custom"
    level: int | None = None
    op_family: str = "unknown"
    dtypes: tuple[str, ...] = ()
    comparator: str = "default"
    tolerance: dict[str, float] = dataclasses.field(default_factory=dict)
    licence: str = "unknown"
    provenance: str = "unknown"
    description: str = ""
    split: str | None = None
    cases: list[Case] = dataclasses.field(default_factory=list)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def source_hash(self) -> str:
        """Content hash of the task file: part of every cache key and of the suite version."""
        return task_source_hash(self.source)

    def case(self, name: str) -> Case:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"task {self.id} has no case {name!r}; it has {[c.name for c in self.cases]}")

    def cases_tagged(self, tag: str) -> list[Case]:
        return [c for c in self.cases if tag in c.tags]

    def summary(self) -> dict[str, Any]:
        """The machine-readable listing used by `amdkv tasks list --json`."""
        return {
            "id": self.id,
            "suite": self.suite,
            "split": self.split,
            "level": self.level,
            "op_family": self.op_family,
            "dtypes": list(self.dtypes),
            "comparator": self.comparator,
            "licence": self.licence,
            "provenance": self.provenance,
            "cases": [
                {"name": c.name, "tags": list(c.tags), "flops": c.flops} for c in self.cases
            ],
            "path": self.path,
            "source_hash": self.source_hash,
        }
