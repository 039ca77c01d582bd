"""`Record`: one unit of corpus evidence, as written to a `RecordStore` and read by the builders.

A record is one of three kinds (a closed list, versioned with `RECORD_SCHEMA_VERSION`):

- `sample`: a task, one candidate program, how it was made (`origin`) and its whole `Verdict`;
- `trajectory`: a task and one multi-turn attempt (`Trajectory.to_record()`, a verdict per turn);
- `rocm_qa`: a question and answer grounded in a file and line range of a ROCm library.

Every record carries its `licence` and `provenance`. Records are plain JSON-able data (the nested
parts are dicts), so a record written today is read by any later amdkv that knows its schema
version, and nothing has to be imported to read one (no torch, no datasets).

Two hashes identify a record:

- `id`: sha256 of the record's whole content (canonical JSON, `id` left out). Identical content
  has the identical id, so appending a record twice stores it once, and an edited record no
  longer matches its id (`from_dict` refuses it).
- `work_key`: the unit of work a generator did, without its outcome: kind, task (id and source
  hash), language and `origin` (model, run, sample index, turn, parent...). A generator that is
  restarted asks `store.done(work_key)` before doing the work again, so a resumed run neither
  repeats work nor writes a second record for it. Give every unit of work a distinct origin
  (e.g. `{"run": "r1", "sample": 3}`): two samples of one task with equal origins are one unit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import TYPE_CHECKING, Any, Mapping

from amdkv.errors import BadInputError

if TYPE_CHECKING:
    from amdkv.prompts.trajectory import Trajectory
    from amdkv.tasks.types import Task
    from amdkv.verify.candidate import Candidate
    from amdkv.verify.verdict import Verdict

RECORD_SCHEMA_VERSION = 1

SAMPLE = "sample"
TRAJECTORY = "trajectory"
ROCM_QA = "rocm_qa"
KINDS = (SAMPLE, TRAJECTORY, ROCM_QA)

# The fields of a record's `task` part: what a corpus row needs without importing the task file.
TASK_FIELDS = ("id", "source", "source_hash", "suite", "suite_version", "level", "op_family", "dtypes",
               "comparator", "licence", "provenance", "split", "metadata")
QA_FIELDS = ("question", "answer", "library", "file", "line_start", "line_end", "commit", "grounding")

GPU_PLATFORMS = ("cuda", "rocm")


def canonical_json(value: Any) -> str:
    """The one serialisation that ids are computed from (sorted keys, no spaces, exact floats)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True)


def content_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8", errors="surrogatepass")).hexdigest()


def task_part(task: "Task") -> dict[str, Any]:
    """The `task` part of a record: id, source and metadata, with the suite version the verdicts
    were judged under (`Task.metadata["suite_version"]`, set for bundled tasks)."""
    return _jsonable({
        "id": task.id, "source": task.source, "source_hash": task.source_hash, "suite": task.suite,
        "suite_version": task.metadata.get("suite_version"), "level": task.level, "op_family": task.op_family,
        "dtypes": list(task.dtypes), "comparator": task.comparator, "licence": task.licence,
        "provenance": task.provenance, "split": task.split,
        "metadata": {k: v for k, v in task.metadata.items() if k != "suite_version"},
    })


def task_from_part(part: Mapping[str, Any]) -> "Task":
    """A `Task` (without cases: enough for prompts and statistics, not for verification) from a
    record's task part. To verify again, load the source as a task file (`amdkv.data.reverify`)."""
    from amdkv.tasks.types import Task

    meta = dict(part.get("metadata") or {})
    if part.get("suite_version") is not None:
        meta["suite_version"] = part["suite_version"]
    return Task(id=part["id"], path="", source=part["source"], suite=part.get("suite") or "custom",
                level=part.get("level"), op_family=part.get("op_family") or "unknown",
                dtypes=tuple(part.get("dtypes") or ()), comparator=part.get("comparator") or "default",
                licence=part.get("licence") or "unknown", provenance=part.get("provenance") or "unknown",
                split=part.get("split"), metadata=meta)


@dataclasses.dataclass
class Record:
    """One record (see the module docstring). Build with `from_verification`, `from_trajectory`
    or `from_qa`; read with `from_dict`."""

    kind: str
    task: dict[str, Any] | None = None
    candidate: dict[str, Any] | None = None     # {"source", "language", "sha256"}
    verdict: dict[str, Any] | None = None       # Verdict.to_dict()
    trajectory: dict[str, Any] | None = None    # Trajectory.to_record()
    qa: dict[str, Any] | None = None            # QA_FIELDS
    origin: dict[str, Any] = dataclasses.field(default_factory=dict)
    licence: str = "unknown"
    provenance: str = "unknown"
    schema_version: int = RECORD_SCHEMA_VERSION

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_verification(cls, task: "Task", candidate: "Candidate", verdict: "Verdict | Mapping[str, Any]", *,
                          origin: Mapping[str, Any] | None = None, licence: str | None = None,
                          provenance: str | None = None) -> "Record":
        """A `sample` record: `task`, the `Candidate` judged and its `Verdict` (or the verdict's
        dict). `origin` defaults to `candidate.origin` (model, run, sample, turn, parent record id,
        sampling parameters...). `licence`/`provenance` default to the task's.

        Refuses a verdict that is not about this candidate or task (its `candidate_sha256` or
        `task_id` differ): a record's evidence must be the evidence of what it holds."""
        verdict_dict = verdict if isinstance(verdict, Mapping) else verdict.to_dict()
        verdict_dict = _jsonable(dict(verdict_dict))
        judged = verdict_dict.get("candidate_sha256")
        if judged is not None and judged != candidate.sha256:
            raise BadInputError(f"the verdict judged candidate {judged[:12]}, not this one ({candidate.sha256[:12]})",
                                hint="pair each Candidate with the Verdict the verifier returned for it")
        if verdict_dict.get("task_id") not in (None, task.id):
            raise BadInputError(f"the verdict is about task {verdict_dict['task_id']!r}, not {task.id!r}",
                                hint="pair each task with the verdicts of its own candidates")
        language = candidate.language if candidate.language != "auto" else verdict_dict.get("language") or "auto"
        return cls(kind=SAMPLE, task=task_part(task),
                   candidate={"source": candidate.source, "language": language, "sha256": candidate.sha256},
                   verdict=verdict_dict, origin=_jsonable(dict(candidate.origin if origin is None else origin)),
                   licence=licence or task.licence, provenance=provenance or task.provenance).check()

    @classmethod
    def from_trajectory(cls, trajectory: "Trajectory", task: "Task", *, origin: Mapping[str, Any] | None = None,
                        licence: str | None = None, provenance: str | None = None) -> "Record":
        """A `trajectory` record. `origin` defaults to the model and the trajectory's metadata
        (run, agent, parent...), so a re-run of the same unit of work has the same `work_key`."""
        if trajectory.task_id != task.id:
            raise BadInputError(f"the trajectory is about task {trajectory.task_id!r}, not {task.id!r}",
                                hint="pass the Task the trajectory was started from")
        record = trajectory.to_record()
        if origin is None:
            origin = {"model": trajectory.model,
                      **{k: v for k, v in trajectory.metadata.items() if k not in ("prompt_config",)}}
        return cls(kind=TRAJECTORY, task=task_part(task), trajectory=record, origin=_jsonable(dict(origin)),
                   licence=licence or task.licence, provenance=provenance or task.provenance).check()

    @classmethod
    def from_qa(cls, *, question: str, answer: str, library: str, file: str, line_start: int, line_end: int,
                commit: str, grounding: Mapping[str, Any], origin: Mapping[str, Any] | None = None,
                licence: str, provenance: str) -> "Record":
        """A `rocm_qa` record: the answer is grounded in `file` lines `line_start`..`line_end` of
        `library` at `commit`; `grounding` holds the check's result (`{"grounded": bool, ...}`)."""
        qa = {"question": question, "answer": answer, "library": library, "file": file,
              "line_start": int(line_start), "line_end": int(line_end), "commit": commit,
              "grounding": _jsonable(dict(grounding))}
        return cls(kind=ROCM_QA, qa=qa, origin=_jsonable(dict(origin or {})), licence=licence,
                   provenance=provenance).check()

    # ------------------------------------------------------------------ identity
    def content(self) -> dict[str, Any]:
        """Everything the id is computed from (all fields). Shallow: the nested parts are the
        record's own (dataclasses.asdict would deep-copy ~10 KB per record for nothing)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @property
    def id(self) -> str:
        return content_hash(self.content())

    @property
    def work_key(self) -> str:
        return work_key(self.kind, task_id=(self.task or {}).get("id"),
                        task_source_hash=(self.task or {}).get("source_hash"), language=self.language,
                        origin=self.origin, qa=self._qa_anchor())

    def _qa_anchor(self) -> dict[str, Any] | None:
        if self.qa is None:
            return None
        return {k: self.qa.get(k) for k in ("library", "file", "line_start", "line_end", "commit")}

    @property
    def language(self) -> str | None:
        if self.candidate is not None:
            return self.candidate.get("language")
        if self.trajectory is not None:
            return self.trajectory.get("language")
        return None

    @property
    def task_id(self) -> str | None:
        return (self.task or {}).get("id")

    # ------------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict with `id` and `work_key` first (the store's fast index reads them)."""
        content = self.content()
        return {"id": content_hash(content), "work_key": self.work_key, **content}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, verify_id: bool = True) -> "Record":
        """The inverse of `to_dict`. Refuses other schema versions, unknown kinds and fields, and
        (with `verify_id`) content that does not match its stored id (an edited record)."""
        version = data.get("schema_version")
        if version != RECORD_SCHEMA_VERSION:
            raise BadInputError(f"record {str(data.get('id'))[:16]} has schema version {version!r}; this amdkv reads "
                                f"record schema version {RECORD_SCHEMA_VERSION}",
                                hint="read it with the amdkv version that wrote it, or convert the store "
                                     "(docs/data.md, 'Record format')")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names - {"id", "work_key"})
        if unknown:
            raise BadInputError(f"record {str(data.get('id'))[:16]} has unknown field(s) {unknown}",
                                hint="records are written by Record.to_dict(); do not add fields by hand")
        record = cls(**{k: v for k, v in data.items() if k in names}).check()
        if verify_id and "id" in data and data["id"] != record.id:
            raise BadInputError(f"record {str(data['id'])[:16]} does not match its content hash {record.id[:16]}",
                                hint="the record was edited after it was written; restore it or remove it")
        return record

    def check(self) -> "Record":
        """Structural checks (raises BadInputError); returns self."""
        if self.kind not in KINDS:
            raise BadInputError(f"unknown record kind {self.kind!r}", hint=f"kinds: {', '.join(KINDS)}")
        need = {SAMPLE: ("task", "candidate", "verdict"), TRAJECTORY: ("task", "trajectory"), ROCM_QA: ("qa",)}
        missing = [name for name in need[self.kind] if getattr(self, name) is None]
        if missing:
            raise BadInputError(f"a {self.kind} record needs {', '.join(missing)}",
                                hint=f"build it with Record.from_{'verification' if self.kind == SAMPLE else self.kind}")
        if self.task is not None:
            absent = [f for f in ("id", "source", "source_hash") if not self.task.get(f)]
            if absent:
                raise BadInputError(f"the record's task part lacks {absent}", hint="use amdkv.data.records.task_part(task)")
        if self.kind == SAMPLE:
            from amdkv.verify.verdict import STATUSES

            if self.verdict.get("status") not in STATUSES:
                raise BadInputError(f"verdict status {self.verdict.get('status')!r} is not a verdict status",
                                    hint=f"statuses: {', '.join(STATUSES)}")
            if not isinstance(self.candidate.get("source"), str):
                raise BadInputError("the candidate part has no source text", hint="Candidate(source=...)")
        if self.kind == ROCM_QA:
            absent = [f for f in QA_FIELDS if self.qa.get(f) in (None, "")]
            if absent:
                raise BadInputError(f"the QA record lacks {absent}", hint="Record.from_qa(...) takes every field")
            if not 1 <= self.qa["line_start"] <= self.qa["line_end"]:
                raise BadInputError(f"line range {self.qa['line_start']}..{self.qa['line_end']} is empty or starts "
                                    "before line 1", hint="lines are 1-based and inclusive")
        return self

    # ------------------------------------------------------------------ views
    def trajectory_object(self) -> "Trajectory":
        from amdkv.prompts.trajectory import Trajectory

        if self.trajectory is None:
            raise BadInputError(f"a {self.kind} record has no trajectory", hint="only trajectory records do")
        return Trajectory.from_record(self.trajectory)

    def task_object(self) -> "Task":
        if self.task is None:
            raise BadInputError(f"a {self.kind} record has no task", hint="rocm_qa records are not about a task")
        return task_from_part(self.task)


def work_key(kind: str, *, task_id: str | None = None, task_source_hash: str | None = None,
             language: str | None = None, origin: Mapping[str, Any] | None = None,
             qa: Mapping[str, Any] | None = None) -> str:
    """The resume key of a unit of work (see the module docstring): what a generator checks with
    `RecordStore.done(key)` before doing the work. `Record.work_key` computes the same value."""
    return content_hash({"kind": kind, "task": task_id, "task_source_hash": task_source_hash,
                         "language": language, "origin": _jsonable(dict(origin or {})), "qa": qa})[:32]


def is_gpu_platform(platform: str | None) -> bool:
    """Verdicts from these platforms ran the kernel on a GPU (execution-verified when `ok`)."""
    return platform in GPU_PLATFORMS


def _jsonable(value: Any) -> Any:
    """A deep copy through JSON (tuples become lists), which also proves the value is JSON-able."""
    try:
        return json.loads(json.dumps(value, allow_nan=True))
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"record content is not JSON-able: {exc}",
                            hint="records hold plain data (str, numbers, bool, None, lists, dicts)") from exc
