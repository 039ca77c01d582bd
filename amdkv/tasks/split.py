"""Deterministic train/eval split of the bundled tasks, by near-duplicate cluster.

Two tasks are near copies when their reference programs share most of their token shingles
(Jaccard similarity of 5-token shingles of the source without comments/docstrings >= 0.6) or
when one's id names the other's op (e.g. l1_softmax / l1_softmax_fp16). Clusters, not tasks,
are assigned to a split, so a task and its near copy are never on both sides. A cluster goes to
`eval` when the hash of its smallest task id falls in the eval fraction (default 25%), which is
stable under adding unrelated tasks. A task may pin its split with METADATA["split"].
"""

from __future__ import annotations

import functools
import hashlib
import io
import re
import tokenize
from typing import Iterable, Iterator, Sequence

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
    if not a or not b:
        return 0.0
    common = len(a & b)  # |a | b| = |a| + |b| - |a & b|: no union set is built
    return common / (len(a) + len(b) - common)


def cluster_indices(n: int, pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Connected components of the graph on 0..n-1 with edges `pairs` (union-find), each sorted,
    in order of their smallest member. Shared by the bundled split (pairs from exact Jaccard) and
    the corpus builders (pairs from MinHash LSH over many thousands of samples, amdkv.data)."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _similar_pairs(shingles: list[set[int]]) -> Iterator[tuple[int, int]]:
    for i in range(len(shingles)):
        for j in range(i + 1, len(shingles)):
            if _jaccard(shingles[i], shingles[j]) >= SIMILARITY_THRESHOLD:
                yield i, j


def near_duplicate_clusters(tasks: list[Task]) -> list[list[Task]]:
    """Union-find over the similarity graph; clusters in deterministic order."""
    groups = cluster_indices(len(tasks), _similar_pairs([_cached_shingles(t.source) for t in tasks]))
    return sorted((sorted((tasks[i] for i in g), key=lambda t: t.id) for g in groups), key=lambda g: g[0].id)


@functools.lru_cache(maxsize=4096)
def _cached_shingles(source: str) -> frozenset[int]:
    return frozenset(_shingles(source))


def related_ids(task: Task, pool: list[Task]) -> frozenset[str]:
    """Ids of the tasks that would share `task`'s cluster if it joined `pool` (task.id included):
    the pool's own clusters of every pool task similar to `task`. Equal to clustering
    `[task, *pool]` again, without redoing the pool's pairs (few-shot selection calls this for
    every new task a corpus holds)."""
    return _related_ids(task.id, task.source, tuple((t.id, t.source) for t in pool))


@functools.lru_cache(maxsize=4096)
def _related_ids(task_id: str, source: str, pool: tuple[tuple[str, str], ...]) -> frozenset[str]:
    probe = _cached_shingles(source)
    ids = {task_id}
    for cluster in _pool_clusters(pool):
        if any(_jaccard(probe, _cached_shingles(src)) >= SIMILARITY_THRESHOLD for _, src in cluster):
            ids.update(i for i, _ in cluster)
    return frozenset(ids)


@functools.lru_cache(maxsize=8)
def _pool_clusters(pool: tuple[tuple[str, str], ...]) -> list[list[tuple[str, str]]]:
    groups = cluster_indices(len(pool), _similar_pairs([_cached_shingles(src) for _, src in pool]))
    return [[pool[i] for i in g] for g in groups]


def bucket(key: str, fractions: Sequence[tuple[str, float]], seed: str | None = None) -> str:
    """The split a cluster goes to: the hash of its key (salted with `seed`) picks a point in
    [0, 1) and `fractions` (name, share), in order, cover that interval. Stable under adding
    unrelated clusters; the bundled split is `bucket(smallest id, [("eval", 0.25), ("train", 0.75)])`."""
    material = key if seed is None else f"{seed}:{key}"
    point = (int(hashlib.sha256(material.encode()).hexdigest()[:8], 16) % 10_000) / 10_000
    edge = 0.0
    for name, share in fractions:
        edge += share
        if point < edge:
            return name
    return fractions[-1][0]


def _eval_bucket(key: str) -> bool:
    return bucket(key, [("eval", EVAL_FRACTION), ("train", 1 - EVAL_FRACTION)]) == "eval"


def assign_splits(tasks: list[Task]) -> None:
    """Set `task.split` in place for every task that does not pin one."""
    for cluster in near_duplicate_clusters(tasks):
        pinned = {t.split for t in cluster if t.split}
        split = pinned.pop() if len(pinned) == 1 else ("eval" if _eval_bucket(cluster[0].id) else "train")
        for t in cluster:
            t.split = split
