"""The two files every throughput benchmark leaves in --out: STEM.json (machine-readable) and
STEM.md (the table). Written after each phase too, so a run cut short keeps what finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable


def write_report(out: Path, stem: str, res: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> str:
    """Write out/STEM.json and out/STEM.md from `res`, each replaced whole (a run killed while
    writing leaves the previous phase's file, never half of one); returns the markdown."""
    md = render(res)
    for path, text in ((out / f"{stem}.json", json.dumps(res, indent=1, default=str)), (out / f"{stem}.md", md)):
        part = path.with_name(f".{path.name}.part")
        part.write_text(text)
        part.replace(path)
    return md


def markdown_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """The lines of a markdown table: the header, its rule (first column left, the rest right) and
    one line per row, each cell as str() writes it."""
    rule = "|---|" + "---:|" * (len(header) - 1)
    return ["| " + " | ".join(header) + " |", rule] + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
