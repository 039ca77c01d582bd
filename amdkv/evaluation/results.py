"""`results.jsonl`: one line per verified sample, appended and fsynced as each verdict arrives.

A killed run loses at most the samples in flight. On the next run the file is read back, a
truncated or garbled last line (the write the kill interrupted) is cut off, and every sample
whose record still matches is reused instead of verified again. A record matches when all of
these are unchanged: task id, sample index, the hash of the sample's source, the hash of the
task's source, the platform and the number of trials. Records with status `infra_error` are
never reused (the harness failed, not the candidate: a re-run retries them). When a sample has
several records (it changed, or was retried), the last one wins.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from amdkv.errors import BadInputError
from amdkv.reports.jsonl import JsonlAppender

RESULTS_SCHEMA_VERSION = 1


def record_key(task_id: str, sample_index: int) -> tuple[str, int]:
    return (task_id, int(sample_index))


def fingerprint(*, sample_sha: str, task_source_hash: str, platform: str, trials: int,
                policy: str = "strict") -> dict[str, Any]:
    """What must be unchanged for a stored verdict to stand for the sample again (`policy` appears
    only when it is not the default, so results written before policies existed still match)."""
    fp = {"sample_sha": sample_sha, "task_source_hash": task_source_hash, "platform": platform,
          "trials": int(trials)}
    if policy != "strict":
        fp["policy"] = policy
    return fp


class ResultsFile(JsonlAppender):
    """Reads, repairs and appends to OUT/results.jsonl (thread-safe appends, see JsonlAppender)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.dropped_tail: bytes = b""   # what load() cut off the end, if anything

    # ------------------------------------------------------------------------------ reading
    def load(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The last record of each (task_id, sample_index); repairs a broken last line.

        A line that is not valid JSON anywhere but at the end of the file was not written by a
        killed run, so it is an error (we never silently drop verified work).
        """
        if not self.path.exists():
            return {}
        data = self.path.read_bytes()
        records: dict[tuple[str, int], dict[str, Any]] = {}
        good_end = 0
        pos = 0
        lineno = 0
        while pos < len(data):
            nl = data.find(b"\n", pos)
            complete = nl != -1
            end = nl + 1 if complete else len(data)
            chunk = data[pos:end]
            lineno += 1
            stripped = chunk.strip()
            is_last = end >= len(data) or not data[end:].strip()
            if not stripped:
                pos = end
                good_end = end if complete else good_end
                continue
            rec = _parse_record(stripped) if complete else None
            if rec is None:
                if is_last:
                    break  # the interrupted write: cut below
                raise BadInputError(
                    f"{self.path} line {lineno} is not a valid result record (and is not the last line, "
                    "so it is not an interrupted write)",
                    hint="delete that line (its sample will be verified again) or use a fresh --out folder")
            records[record_key(rec["task_id"], rec["sample_index"])] = rec
            pos = end
            good_end = end
        if good_end < len(data):
            self.dropped_tail = data[good_end:]
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())
        return records


def _parse_record(line: bytes) -> dict[str, Any] | None:
    try:
        rec = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("task_id"), str) \
            or not isinstance(rec.get("sample_index"), int) or not isinstance(rec.get("verdict"), dict):
        return None
    return rec


def iter_records(path: str | Path) -> Iterator[dict[str, Any]]:
    """Every well-formed record of a results file, in file order (for ad-hoc analysis)."""
    with open(path, "rb") as fh:
        for line in fh:
            rec = _parse_record(line.strip()) if line.strip() else None
            if rec is not None:
                yield rec
