"""Shared formatting for the eval reports (markdown, HTML, console)."""

from __future__ import annotations

import re
from typing import Any, Iterable

SPEED_PREFIXES = ("fast_", "geomean_speedup", "mean_sol")


def is_entry(value: Any) -> bool:
    return isinstance(value, dict) and "aggregation" in value and "value" in value


def _metric_order(name: str) -> tuple[int, float, str]:
    m = re.match(r"(pass|corr|compile)@(\d+)(_turns)?$", name)
    if m:
        family = {"pass": 0, "corr": 1, "compile": 2}[m.group(1)] + (3 if m.group(3) else 0)
        return (family, float(m.group(2)), name)
    if name.startswith("fast_"):
        try:
            return (6, float(name[5:]), name)
        except ValueError:
            return (6, 0.0, name)
    rest = {"geomean_speedup": 7, "geomean_speedup_all": 8, "mean_sol": 9}
    return (rest.get(name, 10), 0.0, name)


def metric_names(metrics: dict[str, Any]) -> list[str]:
    """Every metric entry of a report (or breakdown group), in a stable reading order."""
    return sorted((k for k, v in metrics.items() if is_entry(v)), key=_metric_order)


def is_speed(name: str) -> bool:
    return name.startswith(SPEED_PREFIXES)


def is_rate(name: str) -> bool:
    return "@" in name or name.startswith("fast_") or name == "mean_sol"


def fmt_value(name: str, value: Any) -> str:
    if value is None:
        return "n/a"
    if is_rate(name):
        return f"{value:.3f}"
    return f"{value:.3f}x" if name.startswith("geomean") else f"{value:.3g}"


def fmt_ci(name: str, entry: dict[str, Any]) -> str:
    ci = entry.get("ci95")
    if not ci:
        return "-"
    lo, hi = ci
    if name.startswith("geomean"):
        return f"[{lo:.3f}x, {hi:.3f}x]"
    return f"[{lo:.3f}, {hi:.3f}]"


def fmt_cell(name: str, entry: dict[str, Any] | None) -> str:
    """`value [lo, hi]` or `n/a`."""
    if not entry or entry.get("value") is None:
        return "n/a"
    ci = entry.get("ci95")
    return fmt_value(name, entry["value"]) + (f" {fmt_ci(name, entry)}" if ci else "")


def not_reportable_reason(entry: dict[str, Any], platform: str | None) -> str:
    if platform == "cpu" and is_speed(entry.get("name", "")):
        return "cpu (Triton interpreter) measures no speed"
    return str(entry.get("reason") or "not reportable")


def breakdown_columns(metrics: dict[str, Any]) -> list[str]:
    """Metrics shown in breakdown tables: correctness at each k, and speed on GPU platforms."""
    # corr@k is the same number as pass@k (an alias), so breakdowns show pass@k only
    names = [n for n in metric_names(metrics) if not n.startswith("corr@") or n.endswith("_turns")]
    if metrics.get("platform") == "cpu":
        names = [n for n in names if not is_speed(n)]
    else:
        names = [n for n in names if n != "geomean_speedup_all" and n != "mean_sol"]
    return names


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def join_counts(counts: dict[str, int] | Iterable[tuple[str, int]]) -> str:
    items = counts.items() if isinstance(counts, dict) else counts
    return ", ".join(f"{k}: {v}" for k, v in items)
