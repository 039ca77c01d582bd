"""Read and validate a samples file (JSONL) before anything is verified.

One line per task, in any order:

    {"task_id": "l1_relu", "samples": ["<candidate source>", ...]}
    {"task_id": "l1_relu", "samples": [...], "turns": [0, 1, 2, 0, 1, 2]}   # agent runs

`samples` are in attempt order. With `turns` (one non-negative int per sample) the samples are
turns of agent runs: a run is a stretch of strictly increasing turn numbers, and a turn that is
not larger than the one before it starts the next run ([0, 1, 2, 0, 1, 2] is two runs of three
turns). Without `turns` every sample is an independent run of one turn.

The whole file is checked first and every problem is reported at once, each with its line
number, so a bad file never costs a half-finished evaluation.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from amdkv.errors import BadInputError

MAX_LISTED_ERRORS = 20
KNOWN_KEYS = {"task_id", "samples", "turns"}


def sample_hash(source: str) -> str:
    """Content hash of one candidate's source (part of the resume key)."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class TaskSamples:
    """The samples of one task, as read from one line of the samples file."""

    task_id: str
    line: int
    samples: tuple[str, ...]
    turns: tuple[int, ...] | None = None

    @property
    def run_indices(self) -> tuple[int, ...]:
        """The run (independent attempt) each sample belongs to."""
        if self.turns is None:
            return tuple(range(len(self.samples)))
        runs, run, prev = [], -1, None
        for t in self.turns:
            if prev is None or t <= prev:
                run += 1
            runs.append(run)
            prev = t
        return tuple(runs)

    @property
    def n_runs(self) -> int:
        """n in pass@k: independent runs (= samples for single-shot samples)."""
        idx = self.run_indices
        return (idx[-1] + 1) if idx else 0

    def turn_of(self, i: int) -> int | None:
        return None if self.turns is None else self.turns[i]


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_samples_file(path: str | Path, known_task_ids: Iterable[str]) -> list[TaskSamples]:
    """Every task line of `path`, validated against the suite's task ids.

    Raises `BadInputError` listing every problem found (line number and what is wrong):
    unreadable file, malformed JSON, a line that is not an object, unknown keys, missing or
    unknown `task_id` (with close matches), a task given on two lines, `samples` missing, empty
    or holding a non-string, `turns` of the wrong length or type.
    """
    path = Path(path)
    known = sorted(set(known_task_ids))
    known_set = set(known)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInputError(f"cannot read samples file {path}: {exc}",
                            hint="pass --samples FILE.jsonl, one JSON object per line") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"samples file {path} is not UTF-8: {exc}",
                            hint="write the samples file as UTF-8 JSONL") from exc

    errors: list[str] = []
    seen: dict[str, int] = {}
    out: list[TaskSamples] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        n_before = len(errors)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: malformed JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            errors.append(f"{where}: expected a JSON object with task_id and samples, got "
                          f"{type(obj).__name__}")
            continue
        extra = sorted(set(obj) - KNOWN_KEYS)
        if extra:
            errors.append(f"{where}: unknown key(s) {extra}; allowed keys are {sorted(KNOWN_KEYS)}")
        task_id = obj.get("task_id")
        if not isinstance(task_id, str) or not task_id:
            errors.append(f"{where}: `task_id` must be a non-empty string, got {_describe(task_id)}")
            task_id = None
        elif task_id not in known_set:
            close = difflib.get_close_matches(task_id, known, n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else \
                f"; the suite has {len(known)} task(s)" + (f", e.g. {', '.join(known[:5])}" if known else "")
            errors.append(f"{where}: unknown task id {task_id!r}{hint}")
        elif task_id in seen:
            errors.append(f"{where}: task {task_id!r} already given on line {seen[task_id]}; put all "
                          "samples of a task on one line")
        if task_id is not None and task_id not in seen:
            seen[task_id] = lineno
        samples = obj.get("samples")
        if samples is None:
            errors.append(f"{where}: `samples` is missing")
        elif not isinstance(samples, list):
            errors.append(f"{where}: `samples` must be a list of source strings, got {type(samples).__name__}")
        elif not samples:
            errors.append(f"{where}: `samples` is empty; give at least one candidate source")
        else:
            for i, s in enumerate(samples):
                if not isinstance(s, str):
                    errors.append(f"{where}: sample {i} is not a string (got {type(s).__name__} "
                                  f"{_describe(s)}); each sample is a candidate's source text")
                elif not s.strip():
                    errors.append(f"{where}: sample {i} is an empty string")
        turns = obj.get("turns")
        if turns is not None:
            if not isinstance(turns, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                      and t >= 0 for t in turns):
                errors.append(f"{where}: `turns` must be a list of non-negative ints (turn index per sample)")
            elif isinstance(samples, list) and len(turns) != len(samples):
                errors.append(f"{where}: `turns` has {len(turns)} entries but `samples` has {len(samples)}; "
                              "give one turn index per sample")
        if len(errors) == n_before:
            out.append(TaskSamples(task_id, lineno, tuple(samples),
                                   tuple(turns) if isinstance(turns, list) else None))
    if not errors and not out:
        errors.append("the file holds no task lines")
    if errors:
        shown = errors[:MAX_LISTED_ERRORS]
        more = len(errors) - len(shown)
        msg = f"samples file {path} has {len(errors)} problem(s):\n  " + "\n  ".join(shown)
        if more:
            msg += f"\n  ... and {more} more"
        raise BadInputError(msg, hint='each line is {"task_id": "<id>", "samples": ["<source>", ...]} '
                                      '(optionally "turns": [0, 1, ...]); see docs/eval.md')
    return out


def check_k(entries: Iterable[TaskSamples], ks: Iterable[int]) -> list[tuple[str, int]]:
    """Tasks with fewer runs than the largest k: [(task_id, n_runs), ...]."""
    kmax = max(ks)
    return [(e.task_id, e.n_runs) for e in entries if e.n_runs < kmax]
