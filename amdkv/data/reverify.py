"""`amdkv reverify DATASET --out DIR`: verify a dataset's programs again on this machine.

DATASET is a folder in the Hub layout (an amdkv build), a Hub repo id (read with
`load_dataset`), or a parquet/JSON file or folder of an outside corpus in KernelBook's layout
(`entry_point`, `python_code`, `triton_code`, `licenses`, ...; `amdkv.data.kernelbook`).

Every program of the chosen config and split (translation: `kernel`; optimisation:
`kernel_before` and `kernel_after`; trajectories: every turn's program; KernelBook:
`triton_code`) is verified with `open_verifier` (or over Ray, `--ray`) and written to the record store DIR as a `sample`
record whose origin holds the row it came from and the row's old verdict: the new verdict
stands beside the old one, and `amdkv build ... --records DIR` can build a dataset from the new
evidence (e.g. the interpreter-verified demo corpus re-verified on an AMD GPU). A run that is
stopped resumes where it stopped (work keys). `DIR/reverify_summary.json` compares old and new
statuses.

Task sources are imported to verify against them (tasks are trusted code in amdkv): reverify an
outside corpus inside a container or VM.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator

from amdkv.data import kernelbook
from amdkv.data.records import SAMPLE, Record, work_key
from amdkv.data.store import RecordStore
from amdkv.errors import BadInputError

SUMMARY_FILE = "reverify_summary.json"
PROGRAM_COLUMNS = {"translation": (("kernel", "verdict"),),
                   "optimisation": (("kernel_before", "verdict_before"), ("kernel_after", "verdict_after"))}


@dataclasses.dataclass
class Item:
    """One program to verify again."""

    row_id: str
    split: str
    which: str                  # column (or `turn:<k>`) the program came from
    task_id: str
    task_source: str
    language: str
    source: str
    old_verdict: dict[str, Any] | None
    row: dict[str, Any]         # licence, provenance, model (for the new record)
    kernelbook_row: dict[str, Any] | None = None


def load_rows(dataset: str, config: str | None, split: str | None) -> tuple[str, Any]:
    """(layout, DatasetDict) of DATASET: layout is `amdkv-<kind>` or `kernelbook`."""
    from datasets import DatasetDict, load_dataset

    path = Path(dataset)
    try:
        if path.is_file() or (path.is_dir() and not (path / "README.md").is_file()):
            files = [str(path)] if path.is_file() else sorted(str(p) for p in path.rglob("*")
                                                              if p.suffix in (".parquet", ".json", ".jsonl"))
            if not files:
                raise BadInputError(f"{dataset}: no parquet or JSON files", hint="pass a built dataset folder or a file")
            builder = "parquet" if files[0].endswith(".parquet") else "json"
            data = load_dataset(builder, data_files=files)
        else:
            data = load_dataset(dataset, config) if config else load_dataset(dataset)
    except ValueError as exc:
        if "BuilderConfig" in str(exc) or "config" in str(exc).lower():
            raise BadInputError(f"{dataset} has no config {config!r}: {exc}",
                                hint="list its configs in README.md (`configs:`), or omit --config") from exc
        raise
    if not isinstance(data, DatasetDict):
        data = DatasetDict({"train": data})
    if split is not None:
        if split not in data:
            raise BadInputError(f"{dataset} has no split {split!r} (splits: {', '.join(data)})", hint="pick one of those")
        data = DatasetDict({split: data[split]})
    columns = next(iter(data.values())).column_names
    if kernelbook.is_kernelbook(columns):
        return "kernelbook", data
    if "schema_version" in columns and "messages" in columns:
        if "kernel" in columns:
            return "amdkv-translation", data
        if "kernel_after" in columns:
            return "amdkv-optimisation", data
        if "turns" in columns:
            return "amdkv-trajectories", data
    raise BadInputError(f"{dataset}: neither an amdkv kernel config nor KernelBook's layout (columns: {columns[:12]})",
                        hint="reverify reads torch2<lang>, <lang>2<lang>, trajectories, or KernelBook-layout rows")


def iter_items(layout: str, data: Any, limit: int | None = None) -> Iterator[Item]:
    count = 0
    for split, rows in data.items():
        for index, row in enumerate(rows):
            for item in _items_of(layout, split, index, row):
                if limit is not None and count >= limit:
                    return
                count += 1
                yield item


def _items_of(layout: str, split: str, index: int, row: dict[str, Any]) -> Iterator[Item]:
    meta = {"licence": row.get("licence"), "provenance": row.get("provenance"), "model": row.get("model")}
    if layout == "kernelbook":
        meta["licence"] = ",".join(row.get("licenses") or []) or "unknown"
        yield Item(row_id=kernelbook.task_id(row, index), split=split, which="triton_code",
                   task_id=kernelbook.task_id(row, index), task_source=kernelbook.task_source(row, index),
                   language="triton", source="", old_verdict=None, row=meta, kernelbook_row=dict(row))
        return
    kind = layout.split("-", 1)[1]
    if kind == "trajectories":
        for k, turn in enumerate(row["turns"]):
            if turn.get("code"):
                yield Item(row["id"], split, f"turn:{k}", row["task_id"], row["task_source"], row["language"],
                           turn["code"], _json(turn.get("verdict")), meta)
        return
    for column, verdict_column in PROGRAM_COLUMNS[kind]:
        yield Item(row["id"], split, column, row["task_id"], row["task_source"], row["language"], row[column],
                   _json(row.get(verdict_column)), meta)


def _json(text: str | None) -> dict[str, Any] | None:
    return json.loads(text) if isinstance(text, str) else text


class _Tasks:
    """Task files written under DIR/tasks and loaded once per source."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loaded: dict[tuple[str, str], Any] = {}

    def get(self, task_id: str, source: str) -> Any:
        import hashlib

        from amdkv.tasks.loader import load_task_and_module

        key = (task_id, source)
        if key not in self.loaded:
            digest = hashlib.sha256(source.encode()).hexdigest()[:12]
            path = self.folder / f"{re.sub(r'[^A-Za-z0-9_]', '_', task_id)[:60]}_{digest}.py"
            if not path.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                path.write_text(source, encoding="utf-8")
            self.loaded[key] = load_task_and_module(path, task_id=task_id)
        return self.loaded[key]


def reverify(dataset: str, out: str | os.PathLike[str], *, config: str | None = None, split: str | None = None,
             limit: int | None = None, verifier_config: Any = None, progress: bool = True,
             ray_address: str | None = None) -> dict[str, Any]:
    """Verify the programs of DATASET again (see the module docstring); returns the summary.
    `ray_address`: verify on that Ray cluster instead of this machine (docs/ray.md)."""
    from tqdm import tqdm

    from amdkv.cluster import open_run_verifier
    from amdkv.verify.candidate import Candidate

    layout, data = load_rows(dataset, config, split)
    out = Path(out)
    store = RecordStore(out)
    tasks = _Tasks(out / "tasks")
    unsupported: list[dict[str, str]] = []
    pairs: list[tuple[Any, Any]] = []
    meta: dict[str, dict[str, Any]] = {}
    with open_run_verifier(verifier_config, ray_address=ray_address) as verifier:
        platform = verifier.platform.name
        for item in iter_items(layout, data, limit):
            origin = {"reverify": {"dataset": str(dataset), "config": config, "split": item.split, "row_id": item.row_id,
                                   "which": item.which}, "platform": platform, "model": item.row.get("model"),
                      "old_verdict": item.old_verdict}
            try:
                task, module = tasks.get(item.task_id, item.task_source)
                source = item.source if item.kernelbook_row is None else kernelbook.candidate_source(
                    item.kernelbook_row, list(module.AMDKV_INIT_ARGS), dict(module.AMDKV_INIT_KWARGS))
            except Exception as exc:  # noqa: BLE001 - a row that cannot be loaded or adapted is reported, not fatal
                unsupported.append({"row_id": item.row_id, "which": item.which, "error": f"{type(exc).__name__}: {exc}"})
                continue
            candidate = Candidate(source, language=item.language, origin=origin, name=f"{item.row_id}:{item.which}")
            key = work_key(SAMPLE, task_id=task.id, task_source_hash=task.source_hash, language=item.language,
                           origin=origin)
            if not store.done(key):
                pairs.append((task, candidate))
                meta[candidate.name] = item.row
        bar = tqdm(total=len(pairs), desc=f"reverify on {platform}", unit="program", disable=not progress,
                   file=sys.stderr)

        def record_of(task: Any, candidate: Any, verdict: Any) -> Record:
            row = meta[candidate.name]
            return Record.from_verification(task, candidate, verdict, licence=row.get("licence"),
                                            provenance=row.get("provenance"))

        def write(task: Any, candidate: Any, verdict: Any) -> None:
            store.append(record_of(task, candidate, verdict))
            bar.update(1)

        try:
            verdicts = verifier.verify_many(pairs, on_result=write)
            for (task, candidate), verdict in zip(pairs, verdicts):  # a no-op unless a callback failed
                store.append(record_of(task, candidate, verdict))
        finally:
            bar.close()
            store.close()
    summary = summarize(RecordStore(out, create=False), dataset)
    summary.update(layout=layout, unsupported=unsupported, verified_now=len(pairs))
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return summary


def summarize(store: RecordStore, dataset: str) -> dict[str, Any]:
    """Old status -> new status counts of every reverify record of DATASET in the store."""
    table: collections.Counter = collections.Counter()
    platforms: collections.Counter = collections.Counter()
    for record in store:
        origin = record.origin
        if (origin.get("reverify") or {}).get("dataset") != str(dataset):
            continue
        old = origin.get("old_verdict") or {}
        old_key = f"{old.get('status', 'none')}@{old.get('platform', 'none')}" if old else "none"
        table[(old_key, record.verdict["status"])] += 1
        platforms[record.verdict.get("platform")] += 1
    total = sum(table.values())
    same = sum(n for (old, new), n in table.items() if old.split("@")[0] == new)
    return {"dataset": str(dataset), "programs": total, "platforms": dict(platforms),
            "agreement": (same / total) if total else None,
            "transitions": [{"old": old, "new": new, "count": n} for (old, new), n in sorted(table.items())]}
