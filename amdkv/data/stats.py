"""Statistics of a planned build, for the dataset card and the build report.

Computed from the plan's units (no second read of the records): rows per config and split, per
level, op family, platform and licence; how many rows are execution-verified (GPU) or only
interpreter-verified; the pass distribution (verdict statuses of every judged sample in scope,
per platform, before selection); speedup and optimisation-gain distributions.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from amdkv.data.builder import U_SAMPLE, U_TURN, PairRef, Plan
from amdkv.data.records import is_gpu_platform
from amdkv.data.schemas import OPTIMISATION, ROCM_QA, TRAJECTORIES, TRANSLATION

SPEEDUP_BUCKETS = ((0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, 2.0), (2.0, 4.0), (4.0, float("inf")))


def bucket_label(lo: float, hi: float) -> str:
    return f">= {lo:g}" if hi == float("inf") else f"{lo:g}-{hi:g}"


def distribution(values: list[float]) -> dict[str, Any]:
    """Count, geometric mean, quantiles and bucket counts of positive values (speedups, gains)."""
    if not values:
        return {"count": 0}
    arr = np.asarray(values, dtype=float)
    q = np.quantile(arr, [0.1, 0.5, 0.9])
    return {"count": len(values), "geomean": float(np.exp(np.mean(np.log(arr)))), "p10": float(q[0]),
            "median": float(q[1]), "p90": float(q[2]), "max": float(arr.max()),
            "buckets": {bucket_label(lo, hi): int(((arr >= lo) & (arr < hi)).sum()) for lo, hi in SPEEDUP_BUCKETS}}


def plan_statistics(plan: Plan) -> dict[str, Any]:
    stats: dict[str, Any] = {"configs": {}}
    for config in plan.configs():
        kind = plan.spec.kind(config)
        per_split = {split: len(plan.entries[config][split]) for split in plan.splits(config)}
        units = [_after(plan, e) for split in per_split for e in plan.entries[config][split]]
        entry: dict[str, Any] = {"kind": kind, "rows": sum(per_split.values()), "splits": per_split,
                                 "licences": _count(u.licence or "unknown" for u in units)}
        if kind != ROCM_QA:
            entry["levels"] = _count(_level(plan, u) for u in units)
            entry["op_families"] = _count(plan.tasks[u.task_key].get("op_family") or "unknown" for u in units)
            entry["platforms"] = _count(u.platform or "none" for u in units)
            entry["tasks"] = len({u.task_id for u in units})
            entry["execution_verified"] = sum(1 for u in units if u.gpu_ok)
            entry["interpreter_verified"] = sum(1 for u in units if u.status == "ok" and u.interpreter_verified)
        else:
            entry["libraries"] = _count(u.group.split("/", 1)[0] for u in units)
        if kind == TRANSLATION:
            entry["statuses"] = _count(u.status or "none" for u in units)
            entry["speedup"] = {p: distribution([u.speedup for u in units if u.platform == p and u.speedup])
                                for p in sorted({u.platform for u in units if is_gpu_platform(u.platform)})}
        if kind == OPTIMISATION:
            pairs = [e for split in per_split for e in plan.entries[config][split]]
            entry["pair_sources"] = _count(p.source for p in pairs)
            entry["gain"] = distribution([plan.units[p.after].speedup / plan.units[p.before].speedup for p in pairs])
        if kind == TRAJECTORIES:
            entry["ending_correct"] = sum(1 for u in units if u.status == "ok")
        stats["configs"][config] = entry
    stats["pass"] = pass_distribution(plan)
    return stats


def pass_distribution(plan: Plan) -> dict[str, dict[str, int]]:
    """Verdict statuses of every judged program in the dataset's scope (samples and trajectory
    turns), per platform, before selection, decontamination and deduplication."""
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for u in plan.units:
        if u.kind in (U_SAMPLE, U_TURN) and not (u.removed or "").startswith("scope:"):
            out[u.platform or "none"][u.status or "none"] += 1
    return {p: dict(sorted(c.items())) for p, c in sorted(out.items())}


def _after(plan: Plan, entry: Any):
    return plan.units[entry.after] if isinstance(entry, PairRef) else plan.units[entry]


def _level(plan: Plan, unit) -> str:
    level = plan.tasks[unit.task_key].get("level")
    return f"level {level}" if level is not None else "no level"


def _count(items) -> dict[str, int]:
    return dict(collections.Counter(items).most_common())

