"""The console summary `amdkv eval` prints when it is done (rich)."""

from __future__ import annotations

from typing import Any

from amdkv.evaluation.format import fmt_ci, fmt_value, metric_names, not_reportable_reason, plural


def print_summary(outcome: Any, console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console(stderr=False)
    m = outcome.metrics
    platform = m.get("platform")
    table = Table(title=f"amdkv eval {m.get('suite')}: {plural(m.get('n_tasks') or 0, 'task')}, "
                        f"{plural(m.get('n_samples') or 0, 'sample')} — platform {platform}")
    for col in ("metric", "value", "95% CI", "n", "aggregation"):
        table.add_column(col)
    for name in metric_names(m):
        e = m[name]
        if e.get("value") is None:
            table.add_row(name, "n/a", f"[dim]{not_reportable_reason(e, platform)}[/dim]", str(e.get("n")), "")
        else:
            table.add_row(name, fmt_value(name, e["value"]), fmt_ci(name, e), str(e.get("n")),
                          f"[dim]{e.get('aggregation')}[/dim]")
    console.print(table)
    bench = m.get("benchmark")
    if bench:
        from amdkv.evaluation.benchmarks import agreement_line, comparison_rows

        label = bench["amdkv_label"].replace("_", "-")
        side = Table(title=f"{bench['display']}: the benchmark's rule ({bench['rule']}) next to {label}")
        for col in ("metric", "benchmark rule", "95% CI", label, "95% CI", "n"):
            side.add_column(col)
        for r in comparison_rows(bench):
            side.add_row(r["metric"], r["benchmark"], r["benchmark_ci"], r["amdkv"], r["amdkv_ci"], r["n"])
        console.print(side)
        console.print(f"  agreement: {agreement_line(bench)} (report.md lists every disagreement)")
    console.print(f"  platform: {m.get('platform_description')}")
    if platform == "cpu":
        console.print("  interpreter-verified (Triton CPU interpreter); no speedups on cpu")
    console.print(f"  verified now: {outcome.verified}, reused from results.jsonl: {outcome.reused}")
    if outcome.infra_errors:
        console.print(f"  [magenta]{outcome.infra_errors} sample(s) hit infrastructure errors[/magenta]; "
                      "they are left out of the metrics. Re-run the same command to retry them.")
    for key in ("report_md", "report_html", "metrics", "model_index"):
        if key not in outcome.files:
            continue
        console.print(f"  {key.replace('_', '.')}: {outcome.files[key]}")
