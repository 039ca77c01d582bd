"""Where generation writes its records, behind one small interface (`open_records`).

INTERIM: the project's record store (`amdkv.data.store.RecordStore` with `amdkv.data.records.Record`,
branch `corpora`) has not landed on main yet. Until it does, this module appends the same content
(`Trajectory.to_record()` plus the task's id and source hash, origin, licence and provenance) as
JSON lines to `DIR/gen-records.jsonl`, fsynced per record, and derives resume keys the way the
store will (`work_key` of kind, task, language and origin). Only `open_records` and the
`GenRecords` methods are used by the rest of amdkv.gen: swapping in the store changes this file only.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from amdkv.errors import BadInputError
from amdkv.reports.jsonl import JsonlAppender

if TYPE_CHECKING:
    from amdkv.prompts.trajectory import Trajectory
    from amdkv.tasks.types import Task

TRAJECTORY = "trajectory"
ROCM_QA = "rocm_qa"
RECORDS_FILE = "gen-records.jsonl"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def work_key(kind: str, *, task_id: str | None = None, task_source_hash: str | None = None,
             language: str | None = None, origin: Mapping[str, Any] | None = None,
             qa: Mapping[str, Any] | None = None) -> str:
    """The resume key of one unit of work (what `done()` answers for), without its outcome."""
    payload = {"kind": kind, "task": task_id, "task_source_hash": task_source_hash, "language": language,
               "origin": json.loads(canonical_json(dict(origin or {}))), "qa": qa}
    return hashlib.sha256(canonical_json(payload).encode("utf-8", "surrogatepass")).hexdigest()[:32]


class GenRecords:
    """The records folder of one generation run (thread-safe appends)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._file = self.path / RECORDS_FILE
        self._lock = threading.Lock()
        _drop_torn_tail(self._file)
        self._keys = {r["work_key"] for r in self.records()}
        self._writer = JsonlAppender(self._file, allow_nan=True)

    # ------------------------------------------------------------------ writing
    def append_trajectory(self, trajectory: "Trajectory", task: "Task", origin: Mapping[str, Any]) -> bool:
        """Store one finished trajectory; False when its unit of work is already stored."""
        key = work_key(TRAJECTORY, task_id=task.id, task_source_hash=task.source_hash,
                       language=trajectory.language, origin=origin)
        record = {"work_key": key, "kind": TRAJECTORY,
                  "task": {"id": task.id, "source_hash": task.source_hash, "suite": task.suite,
                           "split": task.split},
                  "trajectory": trajectory.to_record(), "origin": dict(origin),
                  "licence": task.licence, "provenance": task.provenance}
        return self._append(key, record)

    def append_qa(self, qa: Mapping[str, Any], origin: Mapping[str, Any], *, licence: str, provenance: str) -> bool:
        """Store one grounded question-answer pair (fields of `amdkv.gen.qa`); False if stored."""
        anchor = {k: qa.get(k) for k in ("library", "file", "line_start", "line_end", "commit")}
        key = work_key(ROCM_QA, origin=origin, qa=anchor)
        return self._append(key, {"work_key": key, "kind": ROCM_QA, "qa": dict(qa), "origin": dict(origin),
                                  "licence": licence, "provenance": provenance})

    def _append(self, key: str, record: dict[str, Any]) -> bool:
        with self._lock:
            if key in self._keys:
                return False
            self._writer.append(record)
            self._keys.add(key)
            return True

    def close(self) -> None:
        self._writer.close()

    # ------------------------------------------------------------------ reading
    def done(self, key: str) -> bool:
        with self._lock:
            return key in self._keys

    def records(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """Every stored record (a line torn by a kill, always the file's last, is skipped)."""
        return iter_records(self.path, kind)


def iter_records(path: str | os.PathLike[str], kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Records of a records folder written by `GenRecords`."""
    file = Path(path) / RECORDS_FILE
    if not file.exists():
        if not Path(path).is_dir():
            raise BadInputError(f"no records folder at {path}", hint="pass the --out folder of an `amdkv gen` run")
        return
    with open(file, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.endswith("\n"):
                break  # torn tail of a killed writer
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise BadInputError(f"{file}:{n} is not a record ({exc})",
                                    hint="the file was edited or damaged; remove that line") from exc
            if kind is None or record.get("kind") == kind:
                yield record


def _drop_torn_tail(file: Path) -> None:
    """A kill during a write leaves the last line without its newline: cut it off before
    appending (one writer per run folder), or the next record would be glued to it."""
    if not file.exists():
        return
    with open(file, "rb+") as fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)


def open_records(path: str | os.PathLike[str]) -> GenRecords:
    """The one constructor the rest of amdkv.gen uses (swapped for the record store when it lands)."""
    return GenRecords(path)
