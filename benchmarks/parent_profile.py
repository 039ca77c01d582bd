"""Where the verifying (parent) process spends its time during a benchmark phase: its own CPU use
(process CPU time less the sampler's own, so a parent pinned near 100% of one core is visible: its
threads share one GIL) and a sampling profile of every thread's Python stack (sys._current_frames at a fixed interval).

The sampler is a plain thread: it costs one GIL acquisition per interval (5 ms by default), and
it sees Python frames only (time inside C code is charged to the Python line that called it).
Used by throughput.py; no GPU or third-party profiler needed, so it runs on the device image."""

from __future__ import annotations

import collections
import sys
import threading
import time
from typing import Any


def _where(frame: Any) -> str:
    code = frame.f_code
    path = code.co_filename
    short = path.split("site-packages/")[-1] if "site-packages/" in path else path.split("/amdkv/")[-1]
    return f"{short}:{code.co_name}"


class ParentProfile:
    """Context manager: samples the current process's threads until exit; `result()` summarises."""

    def __init__(self, interval_s: float = 0.005, top: int = 25) -> None:
        self.interval_s = interval_s
        self.top = top
        self.leaf: collections.Counter[str] = collections.Counter()
        self.inclusive: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self.sampler_cpu_s = 0.0  # the sampler thread's own CPU, left out of the parent's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="parent-profile", daemon=True)

    def _run(self) -> None:
        me = threading.get_ident()
        try:
            self._sample_until_stopped(me)
        finally:
            self.sampler_cpu_s = time.thread_time()

    def _sample_until_stopped(self, me: int) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                if frame.f_code.co_name in ("wait", "_wait_for_tstate_lock", "select", "accept", "poll"):
                    continue  # a thread blocked waiting: not work
                self.leaf[_where(frame)] += 1
                seen = set()
                f = frame
                while f is not None:
                    w = _where(f)
                    if w not in seen:
                        self.inclusive[w] += 1
                        seen.add(w)
                    f = f.f_back

    def __enter__(self) -> "ParentProfile":
        self._t0, self._c0 = time.monotonic(), time.process_time()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._wall = time.monotonic() - self._t0
        self._cpu = time.process_time() - self._c0 - self.sampler_cpu_s

    def result(self) -> dict[str, Any]:
        """Parent CPU seconds and % of one core, and the most-sampled frames (counts of samples in
        which a non-waiting thread was at / under that function)."""
        return {"parent_cpu_s": round(self._cpu, 2), "sampler_cpu_s": round(self.sampler_cpu_s, 2),
                "parent_cpu_pct_of_one_core": round(100.0 * self._cpu / self._wall, 1) if self._wall > 0 else None,
                "samples": self.samples, "interval_s": self.interval_s,
                "top_leaf": self.leaf.most_common(self.top),
                "top_inclusive": self.inclusive.most_common(self.top)}
