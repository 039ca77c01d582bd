"""An on-disk cache of chat replies, in front of any client (`CachedClient`).

Key: sha256 of the model, the messages (role, content and any reasoning_content), the sampling
parameters without `n`, and the request's sample index when the turn is past the first (see
`request_key`). Value: the list of replies received for that key, in order. Asking for n replies
returns the first n stored; asking for more than are stored asks the model only for the missing
ones and appends them. So a run that is killed and started again sends no request twice, and
`--samples 8` after `--samples 4` reuses the first four.

Never cached: errors of any kind (a failed request stores nothing), and nothing partial (replies
are stored only once the client returned all that were asked). Files are written atomically
(temp file + rename), one per key, so several processes can share one cache folder; a file that
cannot be read (a crash of an old writer, a disk problem) is treated as absent and rewritten.

A cached reply is marked `cached=True` and its tokens count as cached, not generated, in the
run's accounting. Same key and temperature > 0 means the same replies: that is the point (a
resumed run continues where it stopped); to draw fresh samples, change `--seed` or the cache folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Sequence

from amdkv.gen.llm import ClientStats, Message, Reply, RequestContext, SamplingParams

CACHE_FORMAT = 1


def request_key(model: str, messages: Sequence[Message], params: SamplingParams,
                context: RequestContext | None) -> str:
    """The cache key of a request (see the module docstring)."""
    msgs = [{k: m[k] for k in ("role", "content", "reasoning_content") if m.get(k) is not None} for m in messages]
    # Turn 0 asks once for all samples (n = samples): its key has no sample index. Later turns of
    # sample j are asked one at a time: the index keeps two samples that reached the same
    # conversation independent.
    sample = context.sample if context is not None and context.turn > 0 else None
    payload = {"format": CACHE_FORMAT, "model": model, "messages": msgs, "params": params.to_dict(), "sample": sample}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


class RequestCache:
    """The folder of cached replies (`DIR/<key[:2]>/<key>.json`)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    def _file(self, key: str) -> Path:
        return self.path / key[:2] / f"{key}.json"

    def get(self, key: str) -> list[Reply]:
        try:
            data = json.loads(self._file(key).read_text(encoding="utf-8"))
            return [Reply.from_dict(r) for r in data["replies"]]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    def put(self, key: str, replies: Sequence[Reply]) -> None:
        target = self._file(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        stored = [{**r.to_dict(), "cached": False} for r in replies]
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"format": CACHE_FORMAT, "replies": stored}, fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)


class CachedClient:
    """Any `LLMClient` with the request cache in front of it. Same protocol; `stats` are the inner
    client's, with cache hits counted as `cached_replies`."""

    def __init__(self, inner: Any, cache: RequestCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model: str = inner.model
        self.stats: ClientStats = inner.stats
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(key, threading.Lock())

    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        params = params or SamplingParams()
        key = request_key(self.model, messages, params, context)
        with self._lock(key):  # two identical requests at once: the second waits and reads the first's replies
            stored = self.cache.get(key)
            missing = n - len(stored)
            if missing > 0:
                fresh = self.inner.chat(messages, missing, params, context=context)
                stored = stored + list(fresh)
                self.cache.put(key, stored)
                hits = stored[: n - missing]
                new = fresh
            else:
                hits, new = stored[:n], []
        for r in hits:
            r.cached = True
        self.stats.add(cached_replies=len(hits))
        return hits + list(new)

    def close(self) -> None:
        self.inner.close()
