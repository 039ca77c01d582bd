"""The data stage in a few calls (what `amdkv build` and `dataset_scripts/` use).

    report = build_dataset("triton", "runs/triton", "build/amdkv-triton", policy=BuildPolicy(select="faster"))
    datasets = load_built("build/amdkv-triton")          # {config: DatasetDict}, read back with load_dataset
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from amdkv.data.policy import BuildPolicy
from amdkv.errors import BadInputError


def load_policy(path: str | os.PathLike[str] | None = None, overrides: Mapping[str, Any] | None = None) -> BuildPolicy:
    """A BuildPolicy from a YAML or JSON file (its top level, or its `policy:` key) and overrides."""
    data: dict[str, Any] = {}
    if path is not None:
        text = Path(path).read_text(encoding="utf-8")
        try:
            if str(path).endswith(".json"):
                data = json.loads(text)
            else:
                import yaml

                data = yaml.safe_load(text) or {}
        except ValueError as exc:
            raise BadInputError(f"{path} is not valid YAML/JSON: {exc}", hint="fix the file") from exc
        if "policy" in data:
            data = data["policy"]
    return BuildPolicy.from_dict({**data, **dict(overrides or {})})


def build_dataset(dataset: str, records: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  policy: BuildPolicy | None = None, overwrite: bool = False, repo_id: str | None = None,
                  eval_tasks: Iterable[Any] = (), workers: int | None = None, progress: bool = True) -> dict[str, Any]:
    """Records -> a Hub-layout folder: plan (amdkv.data.builder), then write (amdkv.data.hub_layout).
    Returns the build report (what each phase removed, rows per config and split, statistics)."""
    from amdkv.data.builder import Builder
    from amdkv.data.store import open_store
    from amdkv.data.hub_layout import write_plan
    from amdkv.data.schemas import dataset_spec

    spec = dataset_spec(dataset)
    plan = Builder(open_store(records), spec, policy, eval_tasks=eval_tasks, workers=workers, progress=progress).plan()
    return write_plan(plan, out, repo_id=repo_id, overwrite=overwrite, progress=progress)


def load_built(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Every config of a built folder, read back with `datasets.load_dataset(folder, config)`."""
    from datasets import load_dataset

    from amdkv.data.hub_layout import read_layout

    return {config: load_dataset(str(folder), config) for config in read_layout(folder)}
