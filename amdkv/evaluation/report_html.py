"""report.html: one self-contained page (inline CSS, hand-made inline SVG, no scripts, no
external assets, no network). Every piece of text that came from a run is HTML-escaped."""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

from amdkv.env import describe_library
from amdkv.evaluation.format import (breakdown_columns, fmt_cell, fmt_ci, fmt_value, metric_names,
                                     not_reportable_reason, plural)

COLORS = {"pass": "#2b8a3e", "compile": "#1c7ed6", "bar": "#5c7cfa", "fail": "#e03131"}
STATUS_COLORS = {"compile_error": "#e8590c", "runtime_error": "#c2255c", "timeout": "#862e9c",
                 "mismatch": "#e03131", "hack_detected": "#000000", "unverifiable": "#fab005",
                 "infra_error": "#868e96"}

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;
color:#212529;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:1.8em;border-bottom:1px solid #dee2e6;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #dee2e6;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f1f3f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
.banner{padding:.6em 1em;border-radius:6px;margin:.4em 0}
.cpu{background:#fff3bf}.cuda{background:#e7f5ff}.rocm{background:#ebfbee}.warn{background:#fff5f5}
pre{background:#f8f9fa;border:1px solid #dee2e6;padding:.6em;overflow-x:auto;font-size:.8em;
white-space:pre-wrap;word-break:break-word}
.muted{color:#868e96}svg{display:block;margin:.6em 0}
.charts{display:flex;flex-wrap:wrap;gap:2em}
"""


def esc(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


# ------------------------------------------------------------------------------------- charts
def bar_chart(title: str, rows: Sequence[tuple[str, Sequence[tuple[str, float | None, str]]]],
              *, vmax: float = 1.0, width: int = 480, value_format: str = ".2f") -> str:
    """Horizontal grouped bars: rows of (label, [(series, value or None, colour)])."""
    label_w, bar_h, gap, top = 150, 14, 10, 34
    plot_w = width - label_w - 60
    series = rows[0][1] if rows else []
    height = top + len(rows) * (bar_h * max(1, len(series)) + gap) + 20
    parts = [f'<svg width="{width}" height="{height}" role="img" '
             f'aria-label="{esc(title)}">',
             f'<text x="0" y="14" font-size="13" font-weight="bold">{esc(title)}</text>']
    for i, (name, _, colour) in enumerate(series):
        x = label_w + i * 110
        parts.append(f'<rect x="{x}" y="20" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="29" font-size="11">{esc(name)}</text>')
    y = top
    for label, values in rows:
        parts.append(f'<text x="{label_w - 6}" y="{y + bar_h * len(values) / 2 + 4}" font-size="11" '
                     f'text-anchor="end">{esc(label)}</text>')
        for name, value, colour in values:
            if value is None:
                parts.append(f'<text x="{label_w + 4}" y="{y + bar_h - 3}" font-size="10" fill="#868e96">'
                             f'{esc(name)}: n/a</text>')
            else:
                w = max(0.0, min(1.0, value / vmax)) * plot_w if vmax > 0 else 0
                parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" fill="{colour}">'
                             f'<title>{esc(label)} {esc(name)}: {value:.3f}</title></rect>'
                             f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 3}" font-size="10">{value:{value_format}}</text>')
            y += bar_h
        y += gap
    parts.append(f'<line x1="{label_w}" y1="{top - 2}" x2="{label_w}" y2="{y - gap}" stroke="#adb5bd"/>')
    parts.append("</svg>")
    return "".join(parts)


def histogram(title: str, counts: Sequence[int], labels: Sequence[str], *, xlabel: str,
              width: int = 480, colour: str = COLORS["bar"]) -> str:
    height, left, bottom, top = 220, 36, 44, 24
    plot_w, plot_h = width - left - 10, height - top - bottom
    n = max(1, len(counts))
    cmax = max(counts) if counts and max(counts) > 0 else 1
    bw = plot_w / n
    parts = [f'<svg width="{width}" height="{height}" role="img" '
             f'aria-label="{esc(title)}">',
             f'<text x="0" y="14" font-size="13" font-weight="bold">{esc(title)}</text>']
    for i, c in enumerate(counts):
        h = c / cmax * plot_h
        x = left + i * bw
        parts.append(f'<rect x="{x + 1:.1f}" y="{top + plot_h - h:.1f}" width="{bw - 2:.1f}" height="{h:.1f}" '
                     f'fill="{colour}"><title>{esc(labels[i])}: {c}</title></rect>')
        if c:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{top + plot_h - h - 3:.1f}" font-size="10" '
                         f'text-anchor="middle">{c}</text>')
        parts.append(f'<text x="{x + bw / 2:.1f}" y="{top + plot_h + 12}" font-size="9" '
                     f'text-anchor="middle">{esc(labels[i])}</text>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#adb5bd"/>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{height - 8}" font-size="11" text-anchor="middle">'
                 f'{esc(xlabel)}</text>')
    parts.append(f'<text x="4" y="{top + 10}" font-size="10" fill="#868e96">{cmax}</text>')
    parts.append("</svg>")
    return "".join(parts)


def speedup_bins(values: Sequence[float]) -> tuple[list[int], list[str]]:
    """Log2-spaced bins from <1/8x to >=8x."""
    edges = [2.0 ** e for e in range(-3, 4)]  # 0.125 .. 8
    labels = ["<0.125"] + [f"{a:g}-{b:g}" for a, b in zip(edges, edges[1:])] + [">=8"]
    counts = [0] * len(labels)
    for v in values:
        i = 0 if v < edges[0] else min(len(labels) - 1, 1 + int(math.floor(math.log2(v) + 3)))
        counts[i] += 1
    return counts, labels


def sol_bins(values: Sequence[float]) -> tuple[list[int], list[str]]:
    labels = [f"{i / 10:.1f}" for i in range(10)] + [">=1"]
    counts = [0] * len(labels)
    for v in values:
        counts[min(10, int(v * 10))] += 1
    return counts, labels


# --------------------------------------------------------------------------------------- page
def _first_k(m: dict[str, Any]) -> int:
    ks = (m.get("settings") or {}).get("ks") or [1]
    return min(ks)


def _rates_rows(groups: dict[str, Any], k: int) -> list[tuple[str, list[tuple[str, float | None, str]]]]:
    rows = []
    for g, gm in groups.items():
        p, c = gm.get(f"pass@{k}") or {}, gm.get(f"compile@{k}") or {}
        rows.append((str(g), [(f"pass@{k}", p.get("value"), COLORS["pass"]),
                              (f"compile@{k}", c.get("value"), COLORS["compile"])]))
    return rows


def _benchmark_html(m: dict[str, Any]) -> list[str]:
    """The benchmark's own metric next to amdkv's, and the disagreements (as in report.md)."""
    from amdkv.evaluation.benchmarks import agreement_line, comparison_rows

    bench = m.get("benchmark")
    if not bench:
        return []
    label = bench["amdkv_label"].replace("_", "-")
    b = [f"<h2>{esc(bench['display'])}: its own metric next to {esc(label)}</h2>",
         f"<p>benchmark rule: {esc(bench['rule'])}<br>agreement: {esc(agreement_line(bench))}</p>",
         f"<table><tr><th>metric</th><th>benchmark rule</th><th>95% CI</th><th>{esc(label)}</th><th>95% CI</th>"
         "<th>n (tasks)</th></tr>"]
    for r in comparison_rows(bench):
        b.append("<tr>" + "".join(f"<td>{esc(r[c])}</td>" for c in
                                  ("metric", "benchmark", "benchmark_ci", "amdkv", "amdkv_ci", "n")) + "</tr>")
    b.append("</table>")
    rows = (bench.get("agreement") or {}).get("disagreements") or []
    if rows:
        b.append(f"<h3>Disagreements</h3><table><tr><th>task</th><th>sample</th><th>benchmark rule</th>"
                 f"<th>{esc(label)}</th><th>why</th></tr>")
        for d in rows:
            ours = d[bench["amdkv_label"]]
            b.append(f"<tr><td>{esc(d['task_id'])}</td><td>{esc(d['sample_index'])}</td>"
                     f"<td>{esc(d['benchmark']['status'])} {esc(d['benchmark']['reason'] or '')}</td>"
                     f"<td>{esc(ours['status'])} {esc(ours['reason'] or '')}</td><td>{esc(d['why'])}</td></tr>")
        b.append("</table>")
    return b


def render_html(m: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    platform = m.get("platform")
    title = f"amdkv eval: {m.get('suite')} on {platform}"
    b: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                    f"<title>{esc(title)}</title><style>{CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    klass = platform if platform in ("cpu", "cuda", "rocm") else "warn"
    b.append(f'<div class="banner {klass}"><b>Platform:</b> {esc(m.get("platform_description"))}</div>')
    if platform == "cpu":
        b.append('<div class="banner cpu"><b>interpreter-verified:</b> every <code>ok</code> on this page was '
                 'judged by the Triton CPU interpreter, not executed on a GPU. There are no speedups on cpu.</div>')
    elif platform == "cuda":
        b.append('<div class="banner cuda"><b>Not AMD:</b> these numbers come from an NVIDIA GPU; they are '
                 'not AMD Instinct results.</div>')
    settings = m.get("settings") or {}
    env = m.get("env") or {}
    b.append("<ul>")
    b.append(f"<li>suite <code>{esc(m.get('suite'))}</code>, version <code>{esc(m.get('suite_version'))}</code>: "
             f"{esc(m.get('n_tasks'))} of {esc(m.get('n_suite_tasks'))} suite tasks have samples</li>")
    b.append(f"<li>{esc(m.get('n_samples'))} verified samples in {esc(m.get('n_runs'))} independent runs; "
             "status counts: " + esc(", ".join(f"{k} {v}" for k, v in (m.get("status_counts") or {}).items()))
             + "</li>")
    b.append(f"<li>k = {esc(settings.get('ks'))}, p = {esc(settings.get('ps'))}, trials = "
             f"{esc(settings.get('trials'))}, bootstrap = {esc(settings.get('bootstrap'))} "
             f"(seed {esc(settings.get('seed'))}); intervals are 95% percentile bootstraps over tasks</li>")
    b.append(f"<li>amdkv {esc(describe_library(env))}, torch {esc(env.get('torch'))}, "
             f"triton {esc(env.get('triton'))}, device {esc(m.get('device'))}; created {esc(m.get('created'))}</li>")
    excluded = m.get("excluded_samples") or {}
    if any(excluded.values()):
        b.append("<li>excluded from every metric: " + esc(", ".join(f"{k} {v}" for k, v in excluded.items()))
                 + "</li>")
    missing = m.get("tasks_without_samples") or []
    if missing:
        b.append(f"<li>not scored: {esc(plural(len(missing), 'suite task'))} without samples</li>")
    b.append("</ul>")

    # headline
    b.append("<h2>Headline</h2><table><tr><th>metric</th><th>value</th><th>95% CI</th><th>n (tasks)</th>"
             "<th>aggregation</th></tr>")
    for name in metric_names(m):
        e = m[name]
        if e.get("value") is None:
            value, ci = "n/a", f'<span class="muted">{esc(not_reportable_reason(e, platform))}</span>'
        else:
            value, ci = esc(fmt_value(name, e["value"])), esc(fmt_ci(name, e))
        b.append(f'<tr><td><b>{esc(name)}</b></td><td class="num">{value}</td><td>{ci}</td>'
                 f'<td class="num">{esc(e.get("n"))}</td><td>{esc(e.get("aggregation"))}</td></tr>')
    b.append("</table>")

    b += _benchmark_html(m)

    # charts
    k = _first_k(m)
    bd = m.get("breakdowns") or {}
    b.append("<h2>Pass and compile rates</h2><div class=\"charts\">")
    for dim, label in (("level", "level"), ("op_family", "op family")):
        if bd.get(dim):
            b.append(bar_chart(f"pass@{k} and compile@{k} by {label}", _rates_rows(bd[dim], k)))
    b.append("</div>")
    b.append("<h2>Speed</h2>")
    if platform == "cpu":
        b.append("<p>No speedups on cpu: the Triton interpreter runs correctness cases only, so there is no "
                 "speedup or sol distribution to show.</p>")
    else:
        correct = [r["verdict"] for r in records if r["verdict"].get("status") == "ok"]
        sp = [v["speedup"] for v in correct if isinstance(v.get("speedup"), (int, float)) and v["speedup"] > 0]
        sol = [v["sol"] for v in correct if isinstance(v.get("sol"), (int, float)) and v["sol"] >= 0]
        where = esc(m.get("platform_description"))
        b.append(f'<p class="muted">Correct samples only, measured on {where}.</p><div class="charts">')
        if sp:
            c, labels = speedup_bins(sp)
            b.append(histogram(f"speedup t_ref/t_cand ({len(sp)} correct samples)", c, labels,
                               xlabel="speedup (log2 bins)"))
        else:
            b.append("<p>No correct sample was timed.</p>")
        if sol:
            c, labels = sol_bins(sol)
            b.append(histogram(f"sol, fraction of roofline ({len(sol)} samples)", c, labels,
                               xlabel="sol", colour=COLORS["pass"]))
        else:
            b.append("<p>No sol measured.</p>")
        b.append("</div>")

    # breakdown tables
    cols = breakdown_columns(m)
    b.append("<h2>Breakdowns</h2>")
    for dim, groups in bd.items():
        b.append(f"<h3>By {esc(dim.replace('_', ' '))}</h3><table><tr><th>{esc(dim)}</th><th>tasks</th>"
                 "<th>samples</th>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr>")
        for g, gm in groups.items():
            b.append(f"<tr><td>{esc(g)}</td><td class=\"num\">{esc(gm.get('n_tasks'))}</td>"
                     f"<td class=\"num\">{esc(gm.get('n_samples'))}</td>"
                     + "".join(f"<td>{esc(fmt_cell(c, gm.get(c)))}</td>" for c in cols) + "</tr>")
        b.append("</table>")

    # failures
    failures = m.get("failures") or {}
    b.append("<h2>Failures by status and reason</h2>")
    if not failures:
        b.append("<p>Every sample was judged <code>ok</code>.</p>")
    else:
        totals = [(s, sum(x["count"] for x in rs.values())) for s, rs in failures.items()]
        rows = [(s, [("samples", float(n), STATUS_COLORS.get(s, COLORS["fail"]))]) for s, n in totals]
        vmax = max(n for _, n in totals) or 1
        b.append(bar_chart("failed samples by status", rows, vmax=float(vmax), value_format=".0f"))
        b.append("<table><tr><th>status</th><th>reason</th><th>samples</th><th>example diagnostic</th></tr>")
        for status, reasons in failures.items():
            for reason, slot in reasons.items():
                ex = slot.get("example") or {}
                b.append(f"<tr><td>{esc(status)}</td><td>{esc(reason)}</td><td class=\"num\">{esc(slot['count'])}"
                         f"</td><td><details><summary>{esc(ex.get('task_id'))} sample {esc(ex.get('sample_index'))}"
                         f" (<code>{esc(ex.get('sample_path'))}</code>)</summary><pre>"
                         f"{esc(ex.get('diagnostic') or '(no diagnostic)')}</pre></details></td></tr>")
        b.append("</table>")

    # per task
    b.append("<h2>Per task</h2><table><tr><th>task</th><th>level</th><th>op family</th><th>dtypes</th>"
             "<th>samples</th><th>correct</th><th>compiled</th><th>statuses</th></tr>")
    for tid, row in (m.get("tasks") or {}).items():
        b.append(f"<tr><td>{esc(tid)}</td><td>{esc(row.get('level'))}</td><td>{esc(row.get('op_family'))}</td>"
                 f"<td>{esc('+'.join(row.get('dtypes') or []))}</td><td class=\"num\">{row['n_samples']}</td>"
                 f"<td class=\"num\">{row['n_correct']}</td><td class=\"num\">{row['n_compiled']}</td>"
                 f"<td>{esc(', '.join(f'{k} {v}' for k, v in row['statuses'].items()))}</td></tr>")
    b.append("</table>")
    b.append('<p class="muted">Formulas and aggregation rules: docs/metrics.md in the amdkv repository. '
             "All numbers are in metrics.json; one verdict per sample in results.jsonl.</p>")
    b.append("</body></html>")
    return "\n".join(b) + "\n"
