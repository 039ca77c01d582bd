"""A samples file whose one sample per task is the benchmark's own reference solution.

For the reference-as-candidate sanity runs (docs/benchmarks.md): every task whose reference passes
its own benchmark test should be `ok` under amdkv's verifier, or the difference is explained.
External tasks carry their reference in `metadata["reference_candidate"]` (the kernel part of a
TritonBench-G / ROCmBench file; a KernelBench problem with `Model` renamed `ModelNew`, which needs
`amdkv eval --policy reference`); amdkv's bundled tasks use their bundled Triton solution.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from amdkv.errors import BadInputError


def reference_source(task: Any) -> str | None:
    ref = task.metadata.get("reference_candidate")
    if ref:
        return ref
    from amdkv.tasks.builtin import solution_path

    path = solution_path(task.id, "triton")
    return Path(path).read_text() if path else None


def reference_samples(tasks: Iterable[Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """(samples-file lines, ids of tasks without a reference)."""
    lines, missing = [], []
    for t in tasks:
        src = reference_source(t)
        if src:
            lines.append({"task_id": t.id, "samples": [src]})
        else:
            missing.append(t.id)
    return lines, missing


def write_reference_samples(spec: str, out_file: str) -> tuple[int, list[str]]:
    from amdkv.tasks.suites import load_suite

    lines, missing = reference_samples(load_suite(spec))
    if not lines:
        raise BadInputError(f"no task of {spec} has a reference solution", hint="see docs/benchmarks.md")
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return len(lines), missing
