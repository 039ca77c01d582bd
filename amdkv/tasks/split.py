"""Deterministic train/eval split of the bundled tasks, by near-duplicate cluster.

Two tasks are near copies when their reference programs share most of their token shingles
(Jaccard similarity of 5-token shingles of the source without comments/docstrings >= 0.6) or
when one's id names the other's op (e.g. l1_softmax / l1_softmax_fp16). Clusters, not tasks,
are assigned to a split, so a task and its near copy are never on both sides. A cluster goes to
`eval` when the hash of its smallest task id falls in the eval fraction (default 25%), which is
stable under adding unrelated tasks. A task may pin its split with METADATA["split"].
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize

from amdkv.tasks.types import Task

EVAL_FRACTION = 0.25
SIMILARITY_THRESHOLD = 0.6
SHINGLE = 5


def _tokens(source: str) -> list[str]:
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.STRING):
                continue
            out.append(tok.string)
    except (tokenize.TokenError, IndentationError):
        out = re.findall(r"\w+|[^\s\w]", source)
    return out


def _shingles(source: str) -> set[int]:
    toks = _tokens(source)
    return {hash(tuple(toks[i:i + SHINGLE])) for i in range(max(1, len(toks) - SHINGLE + 1))}


def _jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def near_duplicate_clusters(tasks: list[Task]) -> list[list[Task]]:
    """Union-find over the similarity graph; clusters in deterministic order."""
    parent = list(range(len(tasks)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    sh = [_shingles(t.source) for t in tasks]
    for i in range(len(tasks)):
        for j in range(i + 1, len(tasks)):
            if _jaccard(sh[i], sh[j]) >= SIMILARITY_THRESHOLD:
                parent[find(i)] = find(j)
    groups: dict[int, list[Task]] = {}
    for i, t in enumerate(tasks):
        groups.setdefault(find(i), []).append(t)
    return sorted((sorted(g, key=lambda t: t.id) for g in groups.values()), key=lambda g: g[0].id)


def _eval_bucket(key: str) -> bool:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    return (h % 10_000) / 10_000 < EVAL_FRACTION


def assign_splits(tasks: list[Task]) -> None:
    """Set `task.split` in place for every task that does not pin one."""
    for cluster in near_duplicate_clusters(tasks):
        pinned = {t.split for t in cluster if t.split}
        split = pinned.pop() if len(pinned) == 1 else ("eval" if _eval_bucket(cluster[0].id) else "train")
        for t in cluster:
            t.split = split
