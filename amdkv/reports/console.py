"""Console rendering of verdicts with rich. Every table names the platform it describes."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from amdkv.verify.verdict import Verdict

_STYLE = {"ok": "green", "unverifiable": "yellow", "infra_error": "magenta"}


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_verdict(v: Verdict, console: Console | None = None) -> None:
    console = console or Console()
    style = _STYLE.get(v.status, "red")
    head = f"[{style}]{v.status}[/{style}]" + (f" ({v.reason})" if v.reason else "")
    console.print(f"{v.task_id} · {v.language} · platform {v.platform} ({v.device}): {head}")
    if v.interpreter_verified:
        console.print("  interpreter-verified (Triton CPU interpreter; not a GPU execution)")
    if v.cache_hit:
        console.print("  from the verdict cache (an identical verification ran before; --no-verdict-cache runs it again)")
    table = Table(show_header=True)
    for col in ("case", "tags", "status", "max |err|", "allowed", "ref ms", "cand ms", "speedup", "sol"):
        table.add_column(col)
    for c in v.cases:
        table.add_row(c.name, ",".join(c.tags), c.status + (f" ({c.reason})" if c.reason else ""),
                      _fmt(c.max_abs_err, ".3g"), _fmt(c.allowed_abs_err, ".3g"), _fmt(c.ref_ms, ".4f"),
                      _fmt(c.cand_ms, ".4f"), _fmt(c.speedup), _fmt(c.sol))
    if v.cases:
        console.print(table)
    for r in v.resources:
        console.print(f"  {r.arch} {r.kernel}: compiled={r.compiled} vgpr={r.vgpr} agpr={r.agpr} sgpr={r.sgpr} "
                      f"spills={r.vgpr_spill}/{r.sgpr_spill} lds={r.lds_bytes} occupancy={r.occupancy}"
                      + (f" error={r.error}" if r.error else ""))
    if v.diagnostics and v.status != "ok":
        console.print("[dim]" + v.diagnostics[-2500:] + "[/dim]", markup=True, highlight=False)
    console.print(f"  speedup {_fmt(v.speedup)} · total {v.timings.get('total_s', 0):.1f} s")


def print_verdict_table(verdicts: list[Verdict], title: str, console: Console | None = None) -> None:
    console = console or Console()
    platforms = sorted({v.platform or "?" for v in verdicts})
    table = Table(title=f"{title} — platform {', '.join(platforms)}")
    for col in ("task", "status", "reason", "cases", "speedup", "sol", "seconds"):
        table.add_column(col)
    for v in verdicts:
        style = _STYLE.get(v.status, "red")
        table.add_row(v.task_id or "?", f"[{style}]{v.status}[/{style}]", v.reason or "",
                      str(len(v.cases)), _fmt(v.speedup), _fmt(v.sol), f"{v.timings.get('total_s', 0):.1f}")
    console.print(table)
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.status] = counts.get(v.status, 0) + 1
    hits = sum(1 for v in verdicts if v.cache_hit)
    console.print("  " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items()))
                  + (f" ({hits} from the verdict cache)" if hits else ""))
    if "cpu" in platforms:
        console.print("  cpu `ok` = interpreter-verified (Triton CPU interpreter), not GPU-executed; no speedups on cpu")
