"""`RecordStore`: an append-only folder of sharded JSON-lines files of `Record`s.

    store = RecordStore("runs/triton")                 # creates the folder (and store.json)
    if not store.done(key):                            # resume: skip work already recorded
        store.append(Record.from_verification(task, candidate, verdict))
    for record in store: ...                           # every record, shards in name order

Why it survives a kill: every `append` writes one whole line with one `write` and fsyncs it
before returning (`amdkv.reports.jsonl.JsonlAppender`, shared with `amdkv eval`). A SIGKILL can
only tear the line being written, which is then the last bytes of its shard and has no newline;
readers skip such a torn tail (and count it), and the next writer truncates it once it holds the
shard's lock (the dead writer's lock went with its process). Each writer (each `RecordStore`
opened for writing) appends to shards of its own, named by time and process id, so writers in
several processes never interleave bytes. A line that ends with a newline but is not a record
is corruption, not a torn write: reading stops with an error naming the file and line, and
nothing is changed.

Why no duplicates: a record's id is the hash of its content; `append` of an id already in the
store is a no-op (returns False), and readers drop a second copy written concurrently by another
process (the first in shard order wins). Generators resume by `done(work_key)` (records.py).

Layout: `DIR/store.json` (format and record schema version) and
`DIR/shards/records-<time_ns>-<pid>-<seq>.jsonl`; each line is `Record.to_dict()` with `id` and
`work_key` first, so opening a store reads those two without parsing whole records.

Readers open stores with `open_store(path)`, which also accepts a folder that holds its store in
`records/` (an `amdkv gen` run folder), so `amdkv build --records OUT` takes a generation run's
`--out` folder as it is.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

from amdkv.data.records import RECORD_SCHEMA_VERSION, Record
from amdkv.errors import BadInputError
from amdkv.reports.jsonl import JsonlAppender

STORE_FORMAT = "amdkv-record-store"
META_FILE = "store.json"
SHARD_DIR = "shards"
NESTED_STORE_DIR = "records"  # where a run folder (amdkv gen --out) keeps its store
DEFAULT_MAX_SHARD_BYTES = 256 * 1024 * 1024
_PREFIX = '{"id":"'


@dataclasses.dataclass(frozen=True)
class Location:
    """Where one record's line is: for random access by the builders (`RecordStore.read_at`)."""

    shard: int      # index into RecordStore.shard_paths()
    offset: int
    length: int


@dataclasses.dataclass
class ReadReport:
    """What a full read found: records, copies of an id already seen, torn tails skipped."""

    records: int = 0
    duplicates: int = 0
    torn_tails: list[str] = dataclasses.field(default_factory=list)


class RecordStore:
    """See the module docstring. Thread-safe: `append` may be called from verification threads."""

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True,
                 max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES) -> None:
        self.path = Path(path)
        self.max_shard_bytes = max_shard_bytes
        self._lock = threading.Lock()
        self._ids: set[str] | None = None
        self._work_keys: set[str] = set()
        self._writer: JsonlAppender | None = None
        self._writer_lock_fh: Any = None
        self._writer_bytes = 0
        self._seq = 0
        self._open_meta(create)

    # ------------------------------------------------------------------ opening
    def _open_meta(self, create: bool) -> None:
        meta_path = self.path / META_FILE
        if not meta_path.exists():
            if self.path.exists() and any(self.path.iterdir()):
                raise BadInputError(f"{self.path} is not a record store (no {META_FILE}) and is not empty",
                                    hint="pass an empty or new folder, or the folder a RecordStore created")
            if not create:
                raise BadInputError(f"no record store at {self.path}", hint="check the path (--records DIR)")
            (self.path / SHARD_DIR).mkdir(parents=True, exist_ok=True)
            _write_atomic(meta_path, json.dumps({"format": STORE_FORMAT,
                                                 "record_schema_version": RECORD_SCHEMA_VERSION}, indent=2) + "\n")
            return
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BadInputError(f"{meta_path} is unreadable: {exc}",
                                hint="restore it: {\"format\": \"amdkv-record-store\", \"record_schema_version\": 1}") from exc
        if meta.get("format") != STORE_FORMAT:
            raise BadInputError(f"{meta_path} is not an amdkv record store description", hint="check the path")
        if meta.get("record_schema_version") != RECORD_SCHEMA_VERSION:
            raise BadInputError(f"the store at {self.path} holds records of schema version "
                                f"{meta.get('record_schema_version')}; this amdkv reads {RECORD_SCHEMA_VERSION}",
                                hint="use the amdkv version that wrote it, or a new store folder")
        (self.path / SHARD_DIR).mkdir(exist_ok=True)

    def shard_paths(self) -> list[Path]:
        return sorted((self.path / SHARD_DIR).glob("records-*.jsonl"))

    # ------------------------------------------------------------------ index
    def _load_index(self) -> None:
        """Ids and work keys of every record (from each line's first bytes). Repairs torn tails
        of shards whose writer is gone."""
        if self._ids is not None:
            return
        ids: set[str] = set()
        for shard in self.shard_paths():
            _repair_tail_if_writer_gone(shard)
            for _, raw, _ in _iter_lines(shard):
                head = _head(raw)
                if head is None:
                    head = _head_from_json(raw, shard)
                ids.add(head[0])
                self._work_keys.add(head[1])
        self._ids = ids

    def __contains__(self, record_id: object) -> bool:
        with self._lock:
            self._load_index()
            return record_id in self._ids

    def done(self, work_key: str) -> bool:
        """True when a record of this unit of work is stored (`Record.work_key`, `records.work_key`)."""
        with self._lock:
            self._load_index()
            return work_key in self._work_keys

    def __len__(self) -> int:
        with self._lock:
            self._load_index()
            return len(self._ids)

    # ------------------------------------------------------------------ writing
    def append(self, record: Record, *, once_per_work_key: bool = False) -> bool:
        """Store `record` (fsynced before returning); False when its id is already stored, or,
        with `once_per_work_key`, when a record of its unit of work is (see `extend`)."""
        return self.extend([record], once_per_work_key=once_per_work_key) == 1

    def extend(self, records: Iterable[Record], *, once_per_work_key: bool = False) -> int:
        """Store several records with one write and one fsync; returns how many were new.

        `once_per_work_key`: a generator's mode. A unit of work redone after a kill has other
        timings, so another id; checking its `work_key` under the store's lock is what keeps one
        record per unit of work when two threads or a resumed run finish the same unit."""
        lines, fresh, batch_ids, batch_keys = [], [], set(), set()
        with self._lock:
            self._load_index()
            for record in records:
                data = record.to_dict()
                if data["id"] in self._ids or data["id"] in batch_ids:
                    continue
                if once_per_work_key and (data["work_key"] in self._work_keys or data["work_key"] in batch_keys):
                    continue
                batch_ids.add(data["id"])
                batch_keys.add(data["work_key"])
                lines.append(_line(data))
                fresh.append(data)
            if not lines:
                return 0
            writer = self._writer_for(sum(len(line) for line in lines))
            self._writer_bytes += writer.append_lines(lines)
            for data in fresh:
                self._ids.add(data["id"])
                self._work_keys.add(data["work_key"])
        return len(lines)

    def _writer_for(self, incoming: int) -> JsonlAppender:
        if self._writer is not None and self._writer_bytes + incoming > self.max_shard_bytes and self._writer_bytes:
            self._close_writer()
        if self._writer is None:
            self._seq += 1
            path = self.path / SHARD_DIR / f"records-{time.time_ns():020d}-{os.getpid()}-{self._seq:04d}.jsonl"
            self._writer_lock_fh = open(path, "a", encoding="utf-8")
            fcntl.flock(self._writer_lock_fh, fcntl.LOCK_EX)  # held while we write: see _repair_tail_if_writer_gone
            _fsync_dir(path.parent)  # the new file's name is durable before any record is acknowledged
            self._writer = JsonlAppender(path, allow_nan=True).open()
            self._writer_bytes = 0
        return self._writer

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._writer_lock_fh is not None:
            self._writer_lock_fh.close()  # releases the flock
            self._writer_lock_fh = None

    def close(self) -> None:
        with self._lock:
            self._close_writer()

    def __enter__(self) -> "RecordStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ reading
    def __iter__(self) -> Iterator[Record]:
        for _, data in self.iter_dicts():
            yield Record.from_dict(data)

    def dicts(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        """Every record's dict (`Record.to_dict()`, checked as `iter_dicts` checks it), only those
        of `kind` when given: the light read of a run's own outputs (summaries, replay)."""
        for _, data in self.iter_dicts():
            if kind is None or data.get("kind") == kind:
                yield data

    def iter_dicts(self, report: ReadReport | None = None, *, verify: bool = True) -> Iterator[tuple[Location, dict]]:
        """(location, record dict) of every record, in shard order, each id once. Every line is
        checked (`Record.from_dict`: schema version, fields, content hash) unless `verify=False`.
        A corrupt line raises BadInputError naming file and line; a torn last line is skipped."""
        report = report if report is not None else ReadReport()
        seen: set[str] = set()
        for chunk in self.chunks():
            for location, data in iter_chunk(chunk, verify=verify, report=report):
                if data.get("id") in seen:
                    report.duplicates += 1
                    continue
                seen.add(data["id"])
                report.records += 1
                yield location, data

    def chunks(self, target_bytes: int = 32 * 1024 * 1024) -> list["Chunk"]:
        """The shards cut into byte ranges of about `target_bytes` at line starts, in order: units
        of work for reading a large store in several processes (`iter_chunk`)."""
        out = []
        for index, shard in enumerate(self.shard_paths()):
            size = shard.stat().st_size
            start = 0
            with open(shard, "rb") as fh:
                while start < size:
                    end = min(size, start + target_bytes)
                    if end < size:
                        fh.seek(end)
                        fh.readline()  # to the next line start
                        end = min(size, fh.tell())
                    out.append(Chunk(index, str(shard), start, end, end == size))
                    start = end
        return out

    def read_at(self, location: Location, shards: list[Path] | None = None) -> dict[str, Any]:
        """The record dict at `location` (from `iter_dicts` of the same, unchanged store)."""
        path = (shards or self.shard_paths())[location.shard]
        with open(path, "rb") as fh:
            fh.seek(location.offset)
            return json.loads(fh.read(location.length))

    def stats(self) -> dict[str, Any]:
        report = ReadReport()
        kinds: dict[str, int] = {}
        for _, data in self.iter_dicts(report, verify=False):
            kinds[data["kind"]] = kinds.get(data["kind"], 0) + 1
        shards = self.shard_paths()
        return {"path": str(self.path), "records": report.records, "kinds": kinds, "shards": len(shards),
                "bytes": sum(p.stat().st_size for p in shards), "duplicates_skipped": report.duplicates,
                "torn_tails": report.torn_tails}


def store_path(path: str | os.PathLike[str]) -> Path | None:
    """Where the store at `path` is: `path` itself, or `path/records` when `path` is a folder that
    keeps its store there (an `amdkv gen` run folder); None when neither holds one."""
    path = Path(path)
    for candidate in (path, path / NESTED_STORE_DIR):
        if (candidate / META_FILE).is_file():
            return candidate
    return None


def open_store(path: str | os.PathLike[str]) -> RecordStore:
    """An existing store to read (never created by reading), found by `store_path`."""
    found = store_path(path)
    if found is None:
        raise BadInputError(f"no record store at {path} (no {META_FILE} there or in {NESTED_STORE_DIR}/)",
                            hint="pass a record store, or the --out folder of an `amdkv gen` run")
    return RecordStore(found, create=False)


@dataclasses.dataclass(frozen=True)
class Chunk:
    """A byte range of one shard that starts at a line start (see `RecordStore.chunks`)."""

    shard: int
    path: str
    start: int
    end: int
    last: bool      # the range ends at the shard's end (where a torn line may be)


def iter_chunk(chunk: Chunk, *, verify: bool = True, report: ReadReport | None = None) -> Iterator[tuple[Location, dict]]:
    """(location, record dict) of every record in `chunk` (ids not de-duplicated: the caller
    does that across chunks). Same checks as `RecordStore.iter_dicts`."""
    path = Path(chunk.path)
    with open(path, "rb") as fh:
        fh.seek(chunk.start)
        data = fh.read(chunk.end - chunk.start)
    pos, lineno = 0, None
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl == -1:  # only possible at the shard's end: a torn write
            if report is not None:
                report.torn_tails.append(f"{path.name}: {len(data) - pos} bytes at offset {chunk.start + pos}")
            warnings.warn(f"{path}: skipping a torn last line ({len(data) - pos} bytes, a write cut short by a kill)",
                          stacklevel=2)
            return
        raw = data[pos:nl]
        offset = chunk.start + pos
        pos = nl + 1
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise _corrupt(path, _line_number(path, offset), f"not JSON ({exc})") from exc
        if not isinstance(record, dict):
            raise _corrupt(path, _line_number(path, offset), "not a JSON object")
        if verify:
            try:
                Record.from_dict(record, verify_id=not _line_matches_id(raw, record))
            except BadInputError as exc:
                raise BadInputError(f"{path} line {_line_number(path, offset)}: {exc.message}", hint=exc.hint) from exc
        yield Location(chunk.shard, offset, len(raw)), record


def _line_matches_id(raw: bytes, record: dict) -> bool:
    """True when the line's bytes after its `id`/`work_key` head are the canonical JSON its id was
    computed from (how `_line` writes it): the content hash is checked on the bytes read, without
    serialising the record again. Otherwise `Record.from_dict` checks it the slow way."""
    prefix = f'{_PREFIX}{record.get("id")}","work_key":"{record.get("work_key")}",'.encode()
    return raw.startswith(prefix) and hashlib.sha256(b"{" + raw[len(prefix):]).hexdigest() == record.get("id")


def _line_number(path: Path, offset: int) -> int:
    """1-based line number of the line starting at byte `offset` (only for error messages)."""
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


# ---------------------------------------------------------------------- line helpers
def _line(data: dict[str, Any]) -> str:
    """`{"id":...,"work_key":...,<the rest, sorted>}` on one line."""
    rest = {k: v for k, v in data.items() if k not in ("id", "work_key")}
    head = f'{_PREFIX}{data["id"]}","work_key":"{data["work_key"]}"'
    body = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    line = head + ("," + body[1:] if len(body) > 2 else "}")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: store them escaped (json reads them back the same)
        line = head + "," + json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=True)[1:]
    return line


def _head(raw: bytes) -> tuple[str, str] | None:
    """(id, work_key) from a line's fixed prefix, without parsing the record."""
    if not raw.startswith(_PREFIX.encode()) or len(raw) < 64 + 45:
        return None
    record_id = raw[7:71].decode("ascii", errors="replace")
    if raw[71:85] != b'","work_key":"':
        return None
    end = raw.find(b'"', 85)
    return (record_id, raw[85:end].decode("ascii", errors="replace")) if end > 85 else None


def _head_from_json(raw: bytes, shard: Path) -> tuple[str, str]:
    try:
        data = json.loads(raw)
        return data["id"], data["work_key"]
    except (ValueError, KeyError, TypeError) as exc:
        raise _corrupt(shard, None, f"a line that is not a record ({exc})") from exc


def _iter_lines(path: Path, report: ReadReport | None = None) -> Iterator[tuple[int, bytes, int]]:
    """(line number, line without newline, byte offset) of every complete line; a last line
    without a newline is a torn write: skipped (and noted in `report`)."""
    offset = 0
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                if report is not None:
                    report.torn_tails.append(f"{path.name}: {len(line)} bytes after line {lineno - 1}")
                warnings.warn(f"{path}: skipping a torn last line ({len(line)} bytes, a write cut short by a kill)",
                              stacklevel=3)
                return
            stripped = line.rstrip(b"\n")
            if stripped.strip():
                yield lineno, stripped, offset
            offset += len(line)


def _corrupt(shard: Path, lineno: int | None, what: str) -> BadInputError:
    where = f"{shard} line {lineno}" if lineno else str(shard)
    return BadInputError(f"{where} is corrupt: {what}; it is not the torn last line of an interrupted write",
                         hint="nothing was changed; restore the shard from a copy, or move the damaged shard "
                              "out of shards/ to build from the others")


def _repair_tail_if_writer_gone(shard: Path) -> None:
    """Truncate a torn last line once no writer holds the shard's lock (its writer died)."""
    size = shard.stat().st_size
    if size == 0:
        return
    with open(shard, "rb") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
    with open(shard, "r+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # its writer is alive and mid-append: leave it
        try:
            data = fh.read()
            good = data.rfind(b"\n") + 1
            fh.truncate(good)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory; the data itself is synced
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
