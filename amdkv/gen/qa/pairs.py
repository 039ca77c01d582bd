"""Asking for question-answer pairs about one chunk, reading them back, and deduplicating them.

The request (versioned `QA_GEN_PROMPT_VERSION`, recorded with every pair; the kernel prompts'
frozen templates have no QA stage) shows the chunk with its line numbers and asks for a JSON
array of `{question, answer, file, line_start, line_end, identifiers}`. `parse_pairs` takes the
array from a fenced `json` block or the first `[...]` of the reply (a think block is split off
first); items with missing or mistyped fields are dropped and counted (`malformed`).

`Deduplicator`: a pair is a duplicate when its normalised question and answer equal an earlier
pair's, or when they are near (MinHash over word 1- and 2-grams of question + answer, `datasketch`
LSH at Jaccard >= 0.8) AND the two pairs name the same identifiers. The second condition matters:
templated questions about different definitions ("what does `foo` compute?" / "what does `bar`
compute?") are near in words but not duplicates; their names tell them apart. The first pair is
kept. Seeded with the pairs already recorded, so a resumed run deduplicates across invocations.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Iterable

from amdkv.gen.qa.chunker import Chunk

QA_GEN_PROMPT_VERSION = "qa-gen-v1"

QA_GEN_SYSTEM = (
    "You write question-answer pairs about the source code of AMD ROCm libraries, for training "
    "assistants that help engineers write and use GPU kernels on AMD Instinct GPUs. Every answer "
    "must follow from the code you are shown: do not guess about code you cannot see. For each "
    "pair, cite the file and the line range (line numbers as shown, inclusive, at most 80 lines) "
    "that support the answer, and list in `identifiers` the functions, types, macros, variables "
    "or template parameters your answer names, spelled exactly as in the code. Ask what a kernel "
    "or library developer would ask: what a function computes, how work is split over threads or "
    "wavefronts, what a parameter or template argument controls, which edge cases are handled, "
    "how errors are reported."
)

QA_GEN_USER = """Library: {library} (source {commit})
File: {file}, lines {line_start}-{line_end}: the {kind} `{name}`{truncated}

```cpp
{numbered}
```

Write up to {pairs} question-answer pairs about this code. Answer with one JSON array only:

```json
[{{"question": "...", "answer": "...", "file": "{file}", "line_start": N, "line_end": M, "identifiers": ["..."]}}]
```"""


def qa_request(chunk: Chunk, pairs: int) -> list[dict[str, str]]:
    """The messages asking for `pairs` pairs about `chunk`."""
    user = QA_GEN_USER.format(library=chunk.library, commit=chunk.commit, file=chunk.file,
                              line_start=chunk.line_start, line_end=chunk.line_end, kind=chunk.kind, name=chunk.name,
                              truncated=" (its first lines)" if chunk.truncated else "", numbered=chunk.numbered(),
                              pairs=pairs)
    return [{"role": "system", "content": QA_GEN_SYSTEM}, {"role": "user", "content": user}]


@dataclasses.dataclass(frozen=True)
class ProposedPair:
    question: str
    answer: str
    file: str
    line_start: int
    line_end: int
    identifiers: tuple[str, ...] = ()


_FENCED_JSON = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_pairs(reply: str) -> tuple[list[ProposedPair], int, bool]:
    """(pairs, number of malformed items, whether any JSON array was found)."""
    from amdkv.prompts.extract import split_reasoning

    _, answer, _ = split_reasoning(reply)
    data = None
    for candidate in [*(m.group(1) for m in _FENCED_JSON.finditer(answer)), _outer_array(answer)]:
        if not candidate:
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            value = [value]
        if isinstance(value, list):
            data = value
            break
    if data is None:
        return [], 0, False
    pairs, malformed = [], 0
    for item in data:
        try:
            pair = ProposedPair(question=_text(item["question"]), answer=_text(item["answer"]), file=_text(item["file"]),
                                line_start=_int(item["line_start"]), line_end=_int(item["line_end"]),
                                identifiers=tuple(str(i) for i in item.get("identifiers") or () if str(i).strip()))
        except (KeyError, TypeError, ValueError):
            malformed += 1
            continue
        pairs.append(pair)
    return pairs, malformed, True


def _outer_array(text: str) -> str | None:
    start, end = text.find("["), text.rfind("]")
    return text[start:end + 1] if 0 <= start < end else None


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("not a non-empty string")
    return value.strip()


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a line number")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError(f"not a line number: {value!r}")


# ---------------------------------------------------------------------------------- dedup
def normalise_question(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9_]+", text.lower()))


class Deduplicator:
    """See the module docstring. `seen(question, answer, identifiers)` answers True for a
    duplicate (and remembers the pair otherwise)."""

    def __init__(self, threshold: float = 0.8, num_perm: int = 64) -> None:
        from datasketch import MinHashLSH

        self.num_perm = num_perm
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._exact: set[str] = set()
        self._names: dict[str, frozenset[str]] = {}

    def _minhash(self, norm: str):
        from datasketch import MinHash

        words = norm.split()
        grams = set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])}
        m = MinHash(num_perm=self.num_perm, seed=1)
        for g in grams:
            m.update(g.encode("utf-8"))
        return m

    def seen(self, question: str, answer: str, identifiers: Iterable[str] = ()) -> bool:
        norm = normalise_question(question) + " | " + normalise_question(answer)
        if norm in self._exact:
            return True
        names = frozenset(identifiers)
        m = self._minhash(norm)
        if any(self._names[key] == names for key in self._lsh.query(m)):
            return True
        key = f"q{len(self._names)}"
        self._exact.add(norm)
        self._names[key] = names
        self._lsh.insert(key, m)
        return False
