"""Host CPU use between two points in time, from /proc/stat (Linux): the share of all cores that
was busy. Used by the throughput benchmarks, where the host's cores can be the limit."""

from __future__ import annotations

from pathlib import Path


def host_cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies summed over all CPUs; None where /proc/stat is missing."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_pct(a: tuple[int, int] | None, b: tuple[int, int] | None) -> float | None:
    """Percent of the host's CPU time that was busy between two host_cpu_ticks() readings."""
    if not a or not b or b[1] <= a[1]:
        return None
    return round(100.0 * (b[0] - a[0]) / (b[1] - a[1]), 1)


def busy_core_seconds(a: tuple[int, int] | None, b: tuple[int, int] | None, hz: int = 100) -> float | None:
    """Core-seconds the host spent busy between two readings (jiffies at USER_HZ, 100 on Linux)."""
    if not a or not b:
        return None
    return round((b[0] - a[0]) / hz, 2)
