"""Read an outside corpus of PyTorch modules into plain rows.

SOURCE is one of:
- a parquet or JSON-lines file in KernelBook's layout (columns `python_code`, `entry_point`,
  `licenses`, `repo_name`, `module_name`, `sha`, `uuid`, `stars`, `synthetic`, `repo_link`, ...),
  read with `datasets` ("parquet" / "json" builders);
- a folder written by `Dataset.save_to_disk` / `DatasetDict.save_to_disk` (`datasets.load_from_disk`);
- a Hub-layout folder (data files + optional README.md with `configs`; `datasets.load_dataset`);
- a folder of KernelBench-style `.py` files (`Model`, `get_inputs`, `get_init_inputs`), searched
  recursively; a parent folder named `level<N>` gives the task's level.
Only `python_code` is required in tables; the other columns travel as provenance when present.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from pathlib import Path
from typing import Any, Iterator

from amdkv.errors import BadInputError

KERNELBOOK = "kernelbook"
KERNELBENCH = "kernelbench"
CODE_COLUMN = "python_code"
LICENCE_COLUMNS = ("licenses", "license", "licence", "licences")
PROVENANCE_COLUMNS = ("entry_point", "repo_name", "module_name", "sha", "uuid", "stars", "synthetic", "repo_link",
                      "level", "name")
DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".arrow", ".csv")
DISK_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


@dataclasses.dataclass
class SourceRow:
    """One row of a corpus, before any check."""

    index: int                       # position in the source, 0-based (split by split, in order)
    code: str | None
    entry_point: str                 # the class that is the reference program
    licences: Any                    # the licence field as found (parsed by licences.parse_licences)
    layout: str                      # KERNELBOOK (init inputs may be [args, kwargs]) or KERNELBENCH
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)  # provenance columns present

    @property
    def label(self) -> str:
        """How reports name the row."""
        where = self.fields.get("path") or self.fields.get("uuid") or self.fields.get("repo_name") or ""
        return f"row {self.index} ({self.entry_point}{', ' + str(where) if where else ''})"


def _plain(value: Any) -> Any:
    """Values from Arrow rows as JSON-friendly Python values."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _rows_from_table(ds: Any, split: str | None, start: int, source: str) -> Iterator[SourceRow]:
    columns = list(ds.column_names)
    if CODE_COLUMN not in columns:
        raise BadInputError(f"{source}{f' (split {split})' if split else ''} has no `{CODE_COLUMN}` column; "
                            f"its columns are {columns}",
                            hint="ingest rows in KernelBook's layout (python_code, entry_point, licenses, ...) "
                                 "or a folder of KernelBench .py files")
    lic_col = next((c for c in LICENCE_COLUMNS if c in columns), None)
    keep = [CODE_COLUMN] + ([lic_col] if lic_col else []) + [c for c in PROVENANCE_COLUMNS if c in columns]
    for i, row in enumerate(ds.select_columns(keep)):
        fields = {c: _plain(row[c]) for c in PROVENANCE_COLUMNS if c in row and row[c] is not None}
        if split:
            fields["split"] = split
        entry = str(row.get("entry_point") or "Model")
        yield SourceRow(index=start + i, code=row[CODE_COLUMN], entry_point=entry,
                        licences=row[lic_col] if lic_col else None,
                        layout=KERNELBOOK if "entry_point" in columns else KERNELBENCH, fields=fields)


def _load_table(path: Path, cache_dir: str) -> Any:
    """A Dataset or DatasetDict for a table source (raises whatever `datasets` raises)."""
    import datasets

    if path.is_dir():
        if any((path / m).is_file() for m in DISK_MARKERS):
            return datasets.load_from_disk(str(path))
        return datasets.load_dataset(str(path), cache_dir=cache_dir)
    builder = "parquet" if path.suffix == ".parquet" else "csv" if path.suffix == ".csv" else \
        "arrow" if path.suffix == ".arrow" else "json"
    return datasets.load_dataset(builder, data_files=str(path), cache_dir=cache_dir)


def _table_rows(path: Path) -> list[SourceRow]:
    import datasets

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # the ingest has its own progress bar; reading a file is quick
    with tempfile.TemporaryDirectory(prefix="amdkv-ingest-hf-") as cache_dir:
        try:
            loaded = _load_table(path, cache_dir)
        except BadInputError:
            raise
        except Exception as exc:  # noqa: BLE001 - any reader error on a user's file is bad input
            raise BadInputError(f"cannot read {path} as a dataset: {type(exc).__name__}: {str(exc)[:500]}",
                                hint="pass a parquet or JSON-lines file, a datasets folder (save_to_disk or "
                                     "Hub layout) or a folder of KernelBench .py files") from exc
        finally:
            if bars:
                datasets.enable_progress_bars()
        splits = [(name, loaded[name]) for name in sorted(loaded)] if hasattr(loaded, "keys") else [(None, loaded)]
        rows: list[SourceRow] = []
        for name, ds in splits:
            rows += list(_rows_from_table(ds, name, len(rows), str(path)))
        return rows


def _kernelbench_rows(paths: list[Path], root: Path) -> list[SourceRow]:
    rows = []
    for i, p in enumerate(paths):
        try:
            code = p.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            code = None
            fields: dict[str, Any] = {"read_error": f"{type(exc).__name__}: {exc}"}
        else:
            fields = {}
        rel = str(p.relative_to(root)) if root in p.parents else p.name
        fields["path"] = rel
        level = next((m.group(1) for part in p.parent.parts if (m := re.fullmatch(r"level_?(\d+)", part.lower()))), None)
        if level is not None:
            fields["level"] = int(level)
        rows.append(SourceRow(index=i, code=code, entry_point="Model", licences=None, layout=KERNELBENCH, fields=fields))
    return rows


def read_source(source: str) -> tuple[str, list[SourceRow]]:
    """(layout, rows) of SOURCE; BadInputError says what SOURCE should have been."""
    path = Path(source)
    if not path.exists():
        raise BadInputError(f"ingest source {source} does not exist", hint="pass a parquet/JSONL file or a folder")
    if path.is_file():
        if path.suffix == ".py":
            return KERNELBENCH, _kernelbench_rows([path], path.parent)
        if path.suffix not in DATA_SUFFIXES:
            raise BadInputError(f"ingest source {source}: unknown file type {path.suffix!r}",
                                hint=f"use one of {list(DATA_SUFFIXES)} or a folder")
        rows = _table_rows(path)
    elif any((path / m).is_file() for m in DISK_MARKERS) or any(p.suffix in DATA_SUFFIXES for p in path.rglob("*")
                                                                  if p.is_file() and p.name not in DISK_MARKERS):
        rows = _table_rows(path)
    else:
        files = sorted(p for p in path.rglob("*.py") if not p.name.startswith("_"))
        if not files:
            raise BadInputError(f"ingest source {source} holds no data files and no .py files",
                                hint="pass a folder of KernelBench .py files or of parquet/JSONL data files")
        return KERNELBENCH, _kernelbench_rows(files, path)
    layout = rows[0].layout if rows else KERNELBOOK
    return layout, rows
