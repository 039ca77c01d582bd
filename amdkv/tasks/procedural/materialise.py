"""Procedural suites as files: generated once per (generator version, seed) into a cache folder.

Layout (`$AMDKV_CACHE_DIR/procedural/<generator version>/seed<seed>/`, default cache
`~/.cache/amdkv`):

  tasks/<split>/<task id>.py            the reference task (KernelBench format + METADATA + get_cases)
  solutions/triton/<task id>.py         its templated Triton solution
  solutions/hip/<task id>.py            its templated HIP solution (elementwise and row templates)
  <split>.manifest.json                 how many tasks of the split are on disk (written last)

Tasks must be files because workers import tasks by path. Every file is written atomically
(temp file + rename), so concurrent materialisations of the same suite (two test workers, two
verifier parents) only ever see whole files; the content of a file is a function of the generator
version, seed, split and index, so either writer's file is the right one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from amdkv.tasks.procedural import codegen_hip, codegen_torch, codegen_triton, grammar, layout, sampler

GENERATOR_MAJOR = 1
LICENCE = "Apache-2.0"
_GENERATOR_MODULES = (grammar, sampler, layout, codegen_torch, codegen_triton, codegen_hip)


@functools.lru_cache(maxsize=1)
def generator_version() -> str:
    """`<major>-<hash of the generator's code>`: any change to the grammar, the sampler or a code
    template gives a new version, hence a new cache folder and a new suite version."""
    h = hashlib.sha256()
    for module in _GENERATOR_MODULES:
        h.update(Path(module.__file__).read_bytes())
    return f"{GENERATOR_MAJOR}-{h.hexdigest()[:10]}"


def suite_root(seed: int) -> Path:
    from amdkv.config import cache_root  # the config module reads AMDKV_CACHE_DIR

    return cache_root() / "procedural" / generator_version() / f"seed{seed}"


def task_file(spec: sampler.TaskSpec) -> Path:
    """Where the task file of a drawn task lives (once its split is written)."""
    return suite_root(spec.seed) / "tasks" / spec.split / f"{spec.task_id}.py"


def task_metadata(spec: sampler.TaskSpec, lay: layout.Layout, has_hip: bool) -> dict[str, Any]:
    comp = spec.composition
    version = generator_version()
    solutions = {"triton": f"../../solutions/triton/{spec.task_id}.py"}
    if has_hip:
        solutions["hip"] = f"../../solutions/hip/{spec.task_id}.py"
    return {
        "id": spec.task_id,
        "suite": "procedural",
        "split": spec.split,
        "level": comp.level,
        "op_family": comp.op_family,
        "dtypes": lay.dtypes(),
        "licence": LICENCE,
        "provenance": f"original (amdkv procedural generator {version}, seed {spec.seed}, {spec.split} task {spec.index})",
        "description": comp.describe(spec.dtype),
        "composition": comp.key,
        "template": comp.template,
        "heldout_pairs": [list(p) for p in comp.heldout_pairs],
        "generator": {"version": version, "seed": spec.seed, "split": spec.split, "index": spec.index},
        "suite_version": f"procedural-{version}-seed{spec.seed}",
        "solutions": solutions,
    }


def render(spec: sampler.TaskSpec) -> dict[str, str]:
    """The files of one task: {"task": ..., "triton": ..., "hip": ... (when the template allows)}."""
    lay = layout.Layout(spec)
    has_hip = codegen_hip.hip_supported(lay)
    files = {"task": codegen_torch.reference_source(lay, task_metadata(spec, lay, has_hip)),
             "triton": codegen_triton.triton_source(lay)}
    if has_hip:
        files["hip"] = codegen_hip.hip_source(lay)
    return files


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _manifest_count(root: Path, split: str) -> int:
    try:
        return int(json.loads((root / f"{split}.manifest.json").read_text())["count"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write_split(seed: int, split: str, n: int, root: Path | None = None) -> list[Path]:
    """The first `n` task files of the split (written if not already on disk), in index order."""
    root = root or suite_root(seed)
    have = _manifest_count(root, split)
    if have >= n:  # ids depend only on (seed, split, index): no need to draw the tasks again
        paths = [root / "tasks" / split / f"{sampler.task_id(seed, split, i)}.py" for i in range(n)]
        if all(p.is_file() for p in paths):
            return paths
    paths = []
    for spec in sampler.iter_tasks(seed, split, n):
        path = root / "tasks" / split / f"{spec.task_id}.py"
        paths.append(path)
        if spec.index < have and path.is_file():
            continue
        files = render(spec)
        for language in ("triton", "hip"):
            if language in files:
                _write_atomic(root / "solutions" / language / f"{spec.task_id}.py", files[language])
        _write_atomic(path, files["task"])  # the task last: a task file implies its solutions
    if n > have:
        _write_atomic(root / f"{split}.manifest.json", json.dumps({"count": n, "generator": generator_version(),
                                                                   "seed": seed, "split": split}))
    return paths
