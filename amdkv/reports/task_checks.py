"""Console tables for task-suite checks (`amdkv tasks check`) and corpus ingestion (`amdkv tasks ingest`)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

PATH_TITLES = {"fast": "fast path: trusted in-process batch checker (Triton CPU interpreter; not the verifier)",
               "verifier": "verifier: amdkv.verify.Verifier, every check on"}


def print_check_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """One table per checking path, rows per template/dtype; the failure reasons under it."""
    console = console or Console()
    for path, data in summary.items():
        where = "cpu (Triton interpreter)" if data["platform"] == "cpu" else data["platform"]
        table = Table(title=f"{PATH_TITLES.get(path, path)} — platform {where}: {data['ok']}/{data['checked']} ok")
        for col in ("template/dtype", "checked", "ok", "failed"):
            table.add_column(col, justify="right" if col != "template/dtype" else "left")
        for key, row in data["by_template_dtype"].items():
            table.add_row(key, str(row["checked"]), str(row["ok"]), str(row["checked"] - row["ok"]))
        console.print(table)
        if data["failed"]:
            console.print("  failures: " + ", ".join(f"{reason} x{n}" for reason, n in data["failed"].items()))


def print_ingest_report(report: dict[str, Any], console: Console | None = None) -> None:
    """Rows in / kept / dropped, then one line per drop reason with its count and an example."""
    console = console or Console()
    console.print(f"{report['corpus']} ({report['layout']} layout) from {report['source']}: "
                  f"{report['rows_in']} rows in, [green]{report['kept']} kept[/green], {report['dropped']} dropped "
                  f"-> {report['out']} ({report['seconds']:.1f} s)")
    if not report["dropped_by_reason"]:
        return
    table = Table(title="dropped rows")
    for col in ("reason", "rows", "example"):
        table.add_column(col)
    for reason, n in report["dropped_by_reason"].items():
        ex = report["examples"].get(reason, [{}])[0]
        table.add_row(reason, str(n), f"{ex.get('label', '')}: {ex.get('message', '')}"[:160])
    console.print(table)
