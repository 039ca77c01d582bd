"""Request ids: a retry with the id of an earlier request gets that request's answer, not a second run.

The client sends a fresh id (a UUID) with each submission and the same id with each retry of it.
The service remembers id -> (fingerprint of the request, the asyncio task that computes its
answer) for `ttl_s` seconds, at most `max_entries` finished ones (the oldest go first; requests
still running are never forgotten, and they are bounded by the queue). A retry that arrives
while the first is still running waits for that same task. An id reused for a different request
is refused (409 `request_id_reused`), since answering it with the other request's verdict would
be wrong. Answers that were refused before anything ran (429 queue_full, 4xx) are forgotten at
once, so that their retry is tried afresh.

Used from the event loop's thread only (no locks).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from amdkv.serve.protocol import ServiceError


class RecentRequests:
    def __init__(self, ttl_s: float, max_entries: int) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max(1, max_entries)
        self._entries: collections.OrderedDict[str, tuple[str, asyncio.Future[Any], float]] = collections.OrderedDict()

    def get(self, request_id: str, fingerprint: str) -> "asyncio.Future[Any] | None":
        """The answer task of an earlier request with this id, or None."""
        self._prune()
        entry = self._entries.get(request_id)
        if entry is None:
            return None
        if entry[0] != fingerprint:
            raise ServiceError(409, "request_id_reused",
                               f"request_id {request_id!r} was used for a different request",
                               hint="use a fresh request_id (a UUID) for every new submission; reuse it only to retry")
        return entry[1]

    def put(self, request_id: str, fingerprint: str, answer: "asyncio.Future[Any]") -> None:
        self._entries[request_id] = (fingerprint, answer, time.monotonic())
        answer.add_done_callback(lambda fut: self._forget_refused(request_id, fut))
        self._prune()

    def _forget_refused(self, request_id: str, answer: "asyncio.Future[Any]") -> None:
        if not answer.cancelled() and answer.exception() is None:
            return
        entry = self._entries.get(request_id)
        if entry is not None and entry[1] is answer:
            del self._entries[request_id]

    def _prune(self) -> None:
        now = time.monotonic()
        done = [rid for rid, (_, ans, t) in self._entries.items() if ans.done()]
        expired = [rid for rid in done if now - self._entries[rid][2] > self.ttl_s]
        for rid in expired:
            del self._entries[rid]
        excess = len(self._entries) - self.max_entries
        for rid in done:
            if excess <= 0:
                break
            if rid in self._entries:
                del self._entries[rid]
                excess -= 1

    def __len__(self) -> int:
        return len(self._entries)
