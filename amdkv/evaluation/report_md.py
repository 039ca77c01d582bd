"""report.md: the headline table, breakdowns, failures and per-task results of one eval run."""

from __future__ import annotations

import re
from typing import Any

from amdkv.env import describe_library
from amdkv.evaluation.format import (breakdown_columns, fmt_cell, fmt_ci, fmt_value, metric_names,
                                     not_reportable_reason, plural)

BREAKDOWN_TITLES = {"level": "level", "op_family": "op family", "dtype": "dtype", "platform": "platform"}


def _cell(text: Any) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip() or " "


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def header_lines(m: dict[str, Any]) -> list[str]:
    lines = [f"- **platform:** {m.get('platform_description', m.get('platform'))}"]
    if m.get("platform") == "cpu":
        lines.append("- **interpreter-verified:** every `ok` below was judged by the Triton CPU interpreter, "
                     "not executed on a GPU. There are no speedups on cpu.")
    elif m.get("platform") == "cuda":
        lines.append("- **not AMD:** these numbers come from an NVIDIA GPU; they are not AMD Instinct results.")
    settings = m.get("settings", {})
    lines += [
        f"- **suite:** `{m.get('suite')}` (version `{m.get('suite_version')}`), "
        f"{m.get('n_tasks')} of {m.get('n_suite_tasks')} suite tasks have samples",
        f"- **samples:** {m.get('n_samples')} verified samples in {m.get('n_runs')} independent runs; "
        f"status counts: " + ", ".join(f"{k} {v}" for k, v in (m.get("status_counts") or {}).items()),
        f"- **settings:** k = {settings.get('ks')}, p = {settings.get('ps')}, trials = {settings.get('trials')}, "
        f"bootstrap = {settings.get('bootstrap')} (seed {settings.get('seed')}), 95% intervals over tasks",
        f"- **amdkv:** {describe_library(m.get('env', {}))}, "
        f"torch {m.get('env', {}).get('torch')}, triton {m.get('env', {}).get('triton')}; created {m.get('created')}",
    ]
    excluded = m.get("excluded_samples") or {}
    if any(excluded.values()):
        lines.append("- **excluded from every metric:** " + ", ".join(f"{k} {v}" for k, v in excluded.items())
                     + " (not the candidates' fault; a re-run retries infra errors)")
    missing = m.get("tasks_without_samples") or []
    if missing:
        shown = ", ".join(missing[:15]) + (" ..." if len(missing) > 15 else "")
        lines.append(f"- **not scored:** {plural(len(missing), 'suite task')} without samples ({shown})")
    return lines


def benchmark_section(m: dict[str, Any]) -> list[str]:
    """For an external benchmark: its own metric under its own rule next to amdkv's, and every
    sample on which the two verdicts disagree (docs/benchmarks.md)."""
    from amdkv.evaluation.benchmarks import agreement_line, comparison_rows

    b = m.get("benchmark")
    if not b:
        return []
    label = b["amdkv_label"].replace("_", "-")
    out = ["", f"## {b['display']}: its own metric next to {label}", "",
           f"- **benchmark rule:** {b['rule']}",
           f"- **{label}:** amdkv's verdicts (policy `{b['policy']}`: docs/benchmarks.md)",
           f"- **agreement:** {agreement_line(b)}", "",
           f"| metric | benchmark rule | 95% CI | {label} | 95% CI | n (tasks) |", "|---|---|---|---|---|---|"]
    for r in comparison_rows(b):
        out.append(f"| {_cell(r['metric'])} | {r['benchmark']} | {r['benchmark_ci']} | {r['amdkv']} | "
                   f"{r['amdkv_ci']} | {r['n']} |")
    rows = (b.get("agreement") or {}).get("disagreements") or []
    if rows:
        out += ["", "### Disagreements", "", f"| task | sample | benchmark rule | {label} | why |", "|---|---|---|---|---|"]
        for d in rows:
            ours = d[b["amdkv_label"]]
            out.append(f"| {_cell(d['task_id'])} | {d['sample_index']} | {_cell(d['benchmark']['status'])} "
                       f"{_cell(d['benchmark']['reason'] or '')} | {_cell(ours['status'])} {_cell(ours['reason'] or '')} "
                       f"| {_cell(d['why'])} |")
    return out


def render_markdown(m: dict[str, Any]) -> str:
    platform = m.get("platform")
    out = [f"# amdkv eval: {m.get('suite')} on {platform}", ""]
    out += header_lines(m)
    out += ["", "## Headline", "",
            "| metric | value | 95% CI | n (tasks) | aggregation |", "|---|---|---|---|---|"]
    for name in metric_names(m):
        e = m[name]
        if e.get("value") is None:
            value, ci = "n/a", _cell(not_reportable_reason(e, platform))
        else:
            value, ci = fmt_value(name, e["value"]), fmt_ci(name, e)
        out.append(f"| {_cell(name)} | {value} | {ci} | {e.get('n')} | {_cell(e.get('aggregation'))} |")
    if platform == "cpu":
        out += ["", "No speedups: the cpu platform (Triton interpreter) runs correctness cases only, so "
                    "fast_p, geomean speedups and sol are not reportable."]

    out += benchmark_section(m)
    out += ["", "## Breakdowns", ""]
    cols = breakdown_columns(m)
    for dim, groups in (m.get("breakdowns") or {}).items():
        out += [f"### By {BREAKDOWN_TITLES.get(dim, dim)}", "",
                "| " + " | ".join([BREAKDOWN_TITLES.get(dim, dim), "tasks", "samples"] + cols) + " |",
                "|" + "---|" * (3 + len(cols))]
        for g, gm in groups.items():
            out.append("| " + " | ".join([_cell(g), str(gm.get("n_tasks")), str(gm.get("n_samples"))]
                                         + [_cell(fmt_cell(c, gm.get(c))) for c in cols]) + " |")
        out.append("")

    out += ["## Failures by status and reason", ""]
    failures = m.get("failures") or {}
    if not failures:
        out += ["Every sample was judged `ok`.", ""]
    else:
        out += ["| status | reason | samples | example |", "|---|---|---|---|"]
        for status, reasons in failures.items():
            for reason, slot in reasons.items():
                ex = slot.get("example") or {}
                out.append(f"| {_cell(status)} | {_cell(reason)} | {slot['count']} | "
                           f"{_cell(ex.get('task_id'))} sample {ex.get('sample_index')} |")
        out.append("")
        for status, reasons in failures.items():
            for reason, slot in reasons.items():
                ex = slot.get("example") or {}
                out += [f"**{status} / {reason}** ({plural(slot['count'], 'sample')}), example "
                        f"`{ex.get('task_id')}` sample {ex.get('sample_index')} (`{ex.get('sample_path')}`):", "",
                        _fence(ex.get("diagnostic") or "(no diagnostic)"), ""]

    out += ["## Per task", "", "| task | level | op family | dtypes | samples | correct | compiled | statuses |",
            "|---|---|---|---|---|---|---|---|"]
    for tid, row in (m.get("tasks") or {}).items():
        out.append(f"| {_cell(tid)} | {row.get('level')} | {_cell(row.get('op_family'))} | "
                   f"{_cell('+'.join(row.get('dtypes') or []))} | {row['n_samples']} | {row['n_correct']} | "
                   f"{row['n_compiled']} | {_cell(', '.join(f'{k} {v}' for k, v in row['statuses'].items()))} |")
    out += ["", "Formulas and aggregation rules: docs/metrics.md. Files: metrics.json (all numbers), "
                "results.jsonl (one verdict per sample), samples/ (the verified sources).", ""]
    return "\n".join(out)
