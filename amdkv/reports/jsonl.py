"""Append-only JSON-lines files written as results arrive (one record per line, flushed and
fsynced before `append` returns), shared by `amdkv eval`'s results.jsonl, `amdkv demo --out` and the
GPU benchmarks: a run that is killed keeps every record it finished. Thread-safe: verifications
report from several threads."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


class JsonlAppender:
    """Appends records to `path`; `fresh=True` empties the file when it is opened (a new run).
    `allow_nan=False` (strict JSON, what `amdkv eval` reads back) refuses NaN/Infinity values;
    verdict dumps for people (`demo --out`, benchmarks) allow them, as `json.dumps` does."""

    def __init__(self, path: str | Path, *, fresh: bool = False, allow_nan: bool = False) -> None:
        self.path = Path(path)
        self.fresh = fresh
        self.allow_nan = allow_nan
        self._lock = threading.Lock()
        self._fh: Any = None

    def open(self) -> "JsonlAppender":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "w" if self.fresh else "a", encoding="utf-8")
        return self

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line and fsync it before returning."""
        self.append_lines([json.dumps(record, sort_keys=True, allow_nan=self.allow_nan, default=str)])

    def append_lines(self, lines: list[str]) -> int:
        """Write already-serialised records (one JSON text each, no newline inside) with one write
        and one fsync; returns the bytes written. A kill mid-write leaves at most a torn last line."""
        data = "".join(line + "\n" for line in lines)
        with self._lock:
            if self._fh is None:
                self.open()
            self._fh.write(data)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        return len(data.encode("utf-8", errors="surrogatepass"))

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> "JsonlAppender":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()
