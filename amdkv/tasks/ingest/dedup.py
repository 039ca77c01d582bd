"""Exact and near-duplicate detection of ingested rows (datasketch MinHash LSH).

The source is normalised to its Python tokens without comments, docstrings/strings, blank lines
or indentation (amdkv.tasks.split's tokeniser, the one the bundled split uses), so that copies
that differ in formatting or comments are exact duplicates, and copies with a renamed class or a
changed constant are near duplicates: Jaccard similarity of 5-token shingles at or above the
threshold (default 0.85), estimated with 128-permutation MinHash and found with LSH.
"""

from __future__ import annotations

import hashlib

from amdkv.tasks.split import SHINGLE
from amdkv.tasks.split import _tokens as source_tokens

NUM_PERM = 128
DEFAULT_THRESHOLD = 0.85


def exact_key(code: str) -> str:
    """Equal for sources that differ only in comments, docstrings and whitespace."""
    return hashlib.sha256("\x00".join(source_tokens(code)).encode()).hexdigest()


def _minhash(code: str):
    from datasketch import MinHash

    toks = source_tokens(code)
    m = MinHash(num_perm=NUM_PERM, seed=1)
    for i in range(max(1, len(toks) - SHINGLE + 1)):
        m.update("\x00".join(toks[i:i + SHINGLE]).encode())
    return m


class NearDuplicates:
    """Rows offered in order; a row similar to an earlier kept one is reported as its duplicate."""

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        from datasketch import MinHashLSH

        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"near-duplicate threshold {threshold} is not in (0, 1]")
        self.threshold = threshold
        self._lsh = MinHashLSH(threshold=threshold, num_perm=NUM_PERM)
        self._hashes: dict[str, object] = {}

    def offer(self, key: str, code: str) -> tuple[str, float] | None:
        """None when `code` is new (then it is remembered under `key`), else (kept key, estimated Jaccard)."""
        m = _minhash(code)
        matches = [(k, m.jaccard(self._hashes[k])) for k in self._lsh.query(m)]
        matches = [(k, j) for k, j in matches if j >= self.threshold]
        if matches:
            return max(matches, key=lambda kj: (kj[1], kj[0]))
        self._lsh.insert(key, m)
        self._hashes[key] = m
        return None
