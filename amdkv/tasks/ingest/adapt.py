"""Turn a corpus row into a task file: the row's code as it is, plus a short adapter to the task format.

The adapter (appended after the row's code, so line numbers in tracebacks are the row's):
- `class Model(<entry point>)` when the reference class has another name (KernelBook's
  `entry_point`), so the verifier finds `Model`;
- for KernelBook rows, a `get_init_inputs()` that returns positional arguments: KernelBook's
  returns `[args, kwargs]`; binding them to the entry point's `__init__` signature (defaults
  applied) gives the positional list the task format passes to both `Model` and `ModelNew`;
- `METADATA` with licence and provenance (the last assignment wins over one in the row).
Static checks (`static_problem`) run here, in the trusted process, on the AST only: the code is
executed only by the sandboxed check worker.
"""

from __future__ import annotations

import ast
import pprint
import re
from typing import Any

from amdkv.source_ast import parse as parse_source
from amdkv.tasks.ingest.sources import KERNELBOOK, SourceRow

ADAPTER_HEADER = "# ---- amdkv task-format adapter (added by `amdkv tasks ingest`; the code above is the corpus row) ----"
SYNTAX_ERROR = "syntax_error"
EMPTY_CODE = "empty_code"
MISSING_ENTRY_POINT = "missing_entry_point"
MISSING_FUNCTION = "missing_function"
UNREADABLE = "unreadable_file"

_INIT_ADAPTER = '''

_corpus_get_init_inputs = get_init_inputs


def get_init_inputs():
    """Positional __init__ arguments of {entry}: the row returns [args, kwargs] (KernelBook's convention)."""
    import inspect

    raw = list(_corpus_get_init_inputs())
    if len(raw) == 2 and isinstance(raw[0], (list, tuple)) and isinstance(raw[1], dict):
        bound = inspect.signature({entry}).bind(*raw[0], **raw[1])
        bound.apply_defaults()
        if bound.kwargs:
            raise TypeError(f"keyword-only __init__ arguments {{sorted(bound.kwargs)}} cannot be passed by position")
        return list(bound.args)
    return raw
'''


def slug(text: str, limit: int = 40) -> str:
    out = re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()
    return (out or "x")[:limit].rstrip("_")


def static_problem(row: SourceRow) -> tuple[str, str] | None:
    """(reason, message) when the row cannot be a task whatever it does at run time, else None."""
    if row.code is None:
        return UNREADABLE, str(row.fields.get("read_error", "the file could not be read"))
    if not row.code.strip():
        return EMPTY_CODE, "the row's code is empty"
    try:
        tree = parse_source(row.code)
    except SyntaxError as exc:
        return SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}"
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if row.entry_point not in classes:
        return MISSING_ENTRY_POINT, f"no top-level class `{row.entry_point}` (the row's entry point)"
    missing = [f for f in ("get_inputs", "get_init_inputs") if f not in functions]
    if missing:
        return MISSING_FUNCTION, f"no top-level function(s) {missing}"
    return None


def task_source(row: SourceRow, metadata: dict[str, Any]) -> str:
    """The task file's text for a row that passed `static_problem`."""
    assert row.code is not None
    parts = [row.code.rstrip("\n"), "", "", ADAPTER_HEADER]
    if row.entry_point != "Model":
        parts += ["", "", f"class Model({row.entry_point}):",
                  f'    """The corpus row\'s `{row.entry_point}` under the task format\'s class name."""']
    if row.layout == KERNELBOOK:
        parts.append(_INIT_ADAPTER.format(entry=row.entry_point).rstrip("\n"))
    parts += ["", "", "METADATA = " + pprint.pformat(metadata, width=110, sort_dicts=False), ""]
    return "\n".join(parts)
