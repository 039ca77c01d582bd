"""`Candidate`: the source text of one kernel program (defines `ModelNew`) and where it came from.

Callers hand the verifier a `Candidate` (or a path, or `source=`): no temp-file dance on their side.
The verifier writes the text into a private file of its own for the worker (Triton's `@jit` needs
its source in a file), so a path and the same text give the same verdict, and a file edited while
it is being verified cannot change what is judged. Standard library only (light import).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from amdkv.errors import BadInputError, CandidateFormatError
from amdkv.tasks.types import source_sha256  # re-exported: callers import it from here

__all__ = ["Candidate", "as_candidate", "source_sha256"]

LANGUAGES = ("auto", "triton", "hip")


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate program.

    `language`: `auto` (detected from the text), `triton` or `hip`.
    `origin`: how it was made (model, run, turn, parent record id, sampling parameters...): kept
    with records and trajectories, never part of what is judged or of the verdict-cache key.
    `name`: a label for messages (e.g. the file it was read from)."""

    source: str
    language: str = "auto"
    origin: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise BadInputError(f"Candidate.source must be the program text (str), got {type(self.source).__name__}",
                                hint="read the file first, or pass its path to verify()")
        if self.language not in LANGUAGES:
            raise BadInputError(f"unknown candidate language {self.language!r}",
                                hint=f"use one of {', '.join(LANGUAGES)}")

    @property
    def sha256(self) -> str:
        """Hash of the exact text judged: verdicts echo it so callers can check what was judged."""
        return source_sha256(self.source)

    @property
    def label(self) -> str:
        return self.name or f"candidate {self.sha256[:12]}"

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], language: str = "auto", **origin: Any) -> "Candidate":
        path = Path(path)
        try:
            source = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CandidateFormatError(f"cannot read candidate file {path}: {exc}",
                                       hint="pass a readable .py file that defines ModelNew") from exc
        return cls(source=source, language=language, origin=dict(origin), name=str(path))


def as_candidate(candidate: "Candidate | str | os.PathLike[str] | None" = None, *, source: str | None = None,
                 language: str | None = None) -> Candidate:
    """The one way every verifier reads its candidate argument.

    - a `Candidate`: used as it is (`language`, when given, overrides its own);
    - `source=TEXT`: that text;
    - a `str` or path: a FILE to read. A string that is not an existing file but looks like
      program text is refused with a message saying to pass `source=` (a silent guess either way
      would verify the wrong thing)."""
    if source is not None:
        if candidate is not None:
            raise BadInputError("pass either a candidate (Candidate or path) or source=, not both",
                                hint="verify(task, source=text) or verify(task, Candidate(text))")
        return Candidate(source=source, language=language or "auto")
    if isinstance(candidate, Candidate):
        return dataclasses.replace(candidate, language=language) if language else candidate
    if candidate is None:
        raise BadInputError("no candidate given", hint="verify(task, Candidate(source=text)), verify(task, "
                                                       "source=text) or verify(task, 'path/to/candidate.py')")
    if isinstance(candidate, str) and not os.path.exists(candidate) and _looks_like_source(candidate):
        raise BadInputError("the candidate string is not an existing file but looks like program text",
                            hint="a str is read as a path; pass source=text or Candidate(source=text) for text")
    return Candidate.from_file(candidate, language=language or "auto")


def _looks_like_source(text: str) -> bool:
    return "\n" in text or "ModelNew" in text or "import " in text
