"""`amdkv eval --compare A B`: two runs' metrics.json side by side.

A difference is marked significant when both values have 95% intervals and the intervals do
not overlap. That is a conservative test (non-overlapping 95% intervals imply p < 0.05, not
the reverse), chosen because it needs nothing but the two reports. Speed metrics measured on
different platforms are never compared (an H200 timing says nothing about an MI300X).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError
from amdkv.evaluation.format import fmt_ci, fmt_value, is_entry, is_speed, metric_names


def load_metrics(path: str | Path) -> dict[str, Any]:
    """metrics.json from a run folder or the file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / "metrics.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInputError(f"{p} does not exist", hint="pass an `amdkv eval --out` folder or its metrics.json") \
            from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInputError(f"cannot read {p}: {exc}", hint="pass a metrics.json written by amdkv eval") from None
    if not isinstance(data, dict) or not any(is_entry(v) for v in data.values()):
        raise BadInputError(f"{p} holds no metric entries", hint="pass a metrics.json written by amdkv eval")
    data["_path"] = str(p)
    return data


def _overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    if not a or not b:
        return None
    return not (a[1] < b[0] or b[1] < a[0])


def compare_metrics(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Row per metric present in either report, plus notes on what differs between the runs."""
    notes: list[str] = []
    pa, pb = a.get("platform"), b.get("platform")
    if pa != pb:
        notes.append(f"platforms differ ({pa} vs {pb}): speed metrics are not compared")
    if a.get("suite_version") != b.get("suite_version"):
        notes.append(f"suite versions differ ({a.get('suite_version')} vs {b.get('suite_version')}): "
                     "the task sets or task files are not the same")
    ta, tb = set((a.get("tasks") or {}).keys()), set((b.get("tasks") or {}).keys())
    if ta and tb and ta != tb:
        notes.append(f"scored task sets differ ({len(ta - tb)} only in A, {len(tb - ta)} only in B)")
    rows = []
    names = metric_names({**{k: v for k, v in b.items()}, **{k: v for k, v in a.items()}})
    for name in names:
        ea, eb = a.get(name) if is_entry(a.get(name)) else None, b.get(name) if is_entry(b.get(name)) else None
        va = ea.get("value") if ea else None
        vb = eb.get("value") if eb else None
        row: dict[str, Any] = {"metric": name, "a": va, "b": vb,
                               "a_ci95": ea.get("ci95") if ea else None, "b_ci95": eb.get("ci95") if eb else None,
                               "a_n": ea.get("n") if ea else None, "b_n": eb.get("n") if eb else None,
                               "diff": None, "significant": False, "comparable": True, "note": None}
        if is_speed(name) and pa != pb:
            row["comparable"], row["note"] = False, "different platforms"
        elif va is None or vb is None:
            row["comparable"], row["note"] = False, "not reportable in " + ("both" if va is None and vb is None
                                                                            else "A" if va is None else "B")
        elif ea.get("aggregation") != eb.get("aggregation"):
            row["comparable"], row["note"] = False, "different aggregation"
        else:
            row["diff"] = vb - va
            ov = _overlap(row["a_ci95"], row["b_ci95"])
            row["significant"] = ov is False
            if ov is None:
                row["note"] = "no intervals"
        rows.append(row)
    return {"a": {"path": a.get("_path"), "suite": a.get("suite"), "platform": pa,
                  "platform_description": a.get("platform_description"), "n_tasks": a.get("n_tasks")},
            "b": {"path": b.get("_path"), "suite": b.get("suite"), "platform": pb,
                  "platform_description": b.get("platform_description"), "n_tasks": b.get("n_tasks")},
            "notes": notes, "rows": rows}


def print_comparison(cmp: dict[str, Any], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    a, b = cmp["a"], cmp["b"]
    table = Table(title=f"A = {a['path']} ({a['platform']}) vs B = {b['path']} ({b['platform']})")
    for col in ("metric", "A", "A 95% CI", "B", "B 95% CI", "B - A", "significant"):
        table.add_column(col)
    for r in cmp["rows"]:
        name = r["metric"]
        ea = {"ci95": r["a_ci95"]}
        eb = {"ci95": r["b_ci95"]}
        diff = "-" if r["diff"] is None else f"{r['diff']:+.3f}"
        sig = "[bold red]yes[/bold red]" if r["significant"] else ("no" if r["comparable"] else f"[dim]{r['note']}[/dim]")
        if r["comparable"] and r["note"]:
            sig += f" [dim]({r['note']})[/dim]"
        table.add_row(name, fmt_value(name, r["a"]), fmt_ci(name, ea), fmt_value(name, r["b"]), fmt_ci(name, eb),
                      diff, sig)
    console.print(table)
    for label, side in (("A", a), ("B", b)):
        console.print(f"  {label}: platform {side['platform_description'] or side['platform']}")
    for note in cmp["notes"]:
        console.print(f"  [yellow]note:[/yellow] {note}")
    console.print("  significant = the two 95% bootstrap intervals do not overlap")
