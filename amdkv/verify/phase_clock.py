"""Wall and host-CPU seconds per named step of a worker's life (start-up parts, job phases).

Why: the speed goals are stated in host core-seconds per candidate as well as wall seconds
(docs/gpu.md, Throughput), and only a per-step split says which step to cut. CPU time counts
this process and its waited-for children (gcc, ptxas), so a compiler run shows up in the step
that started it. Standard library only: workers import it before any candidate code exists.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager


def children_cpu_s() -> float:
    """CPU seconds of this process's waited-for children (compilers: gcc, ptxas) so far."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def process_cpu_s() -> float:
    """CPU seconds this process and its waited-for children have used so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + children_cpu_s()


class PhaseClock:
    """Accumulates `wall[name]`, `cpu[name]` and `children_cpu[name]` (the compilers' share of
    `cpu`) over every `with clock.phase(name):` block.

    Phases named up front start at 0.0, so a report always has the same keys even when a step
    never ran (an import error skips the trials). `wall_only`: times measured elsewhere and added
    with `add_wall` (a lock's wait inside the timing phase), which have no CPU split of their own."""

    def __init__(self, names: tuple[str, ...] = (), wall_only: tuple[str, ...] = ()) -> None:
        self.wall: dict[str, float] = {n: 0.0 for n in names + wall_only}
        self.cpu: dict[str, float] = {n: 0.0 for n in names}
        self.children_cpu: dict[str, float] = {n: 0.0 for n in names}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0, c0, k0 = time.monotonic(), process_cpu_s(), children_cpu_s()
        try:
            yield
        finally:
            self.wall[name] = self.wall.get(name, 0.0) + time.monotonic() - t0
            self.cpu[name] = self.cpu.get(name, 0.0) + process_cpu_s() - c0
            self.children_cpu[name] = self.children_cpu.get(name, 0.0) + children_cpu_s() - k0

    def add_wall(self, name: str, seconds: float) -> None:
        """Add wall seconds measured elsewhere (the timing lock's wait and hold)."""
        self.wall[name] = self.wall.get(name, 0.0) + seconds
