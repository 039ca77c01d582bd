"""Rows of outside corpora in KernelBook's layout as amdkv tasks and candidates.

KernelBook (GPUMODE/KernelBook and corpora copying its layout) has one row per PyTorch module:
`entry_point` (the module's class name), `python_code` (the module with `get_inputs()` and
`get_init_inputs()`, the latter returning `[args, kwargs]`), `triton_code` (a Triton program whose
class `<entry_point>New` replaces the module), plus `repo_name`, `module_name`, `synthetic`,
`uuid`, `licenses`, `stars`, `sha`, `repo_link` (and `original_triton_code`).

amdkv's task format wants `Model`, `get_init_inputs()` returning positional arguments, and a
candidate class `ModelNew` built with those arguments. The adapter appends to each side a few
lines (never edits the row's code): the task gets `class Model(<entry_point>)` that calls the
original constructor with KernelBook's args and kwargs and `get_init_inputs()` returning `[]`;
the candidate gets `class ModelNew(<entry_point>New)` calling its constructor with the same
values, written into the candidate as Python literals (read from the task after it is loaded).
Rows whose init arguments are not plain literals (e.g. tensors) are reported as unsupported.
"""

from __future__ import annotations

import ast
from typing import Any, Mapping

from amdkv.errors import BadInputError

COLUMNS = ("entry_point", "python_code", "triton_code")
MARK = "# --- amdkv: KernelBook adapter (appended; the code above is the row's own) ---"


def is_kernelbook(columns) -> bool:
    return all(c in columns for c in COLUMNS)


def task_id(row: Mapping[str, Any], index: int) -> str:
    uuid = row.get("uuid")
    return f"kernelbook/{uuid if uuid is not None else index}_{row['entry_point']}"


def task_source(row: Mapping[str, Any], index: int) -> str:
    entry = _identifier(row["entry_point"])
    licences = row.get("licenses") or []
    metadata = {"id": task_id(row, index), "suite": "kernelbook", "licence": ",".join(licences) or "unknown",
                "provenance": f"KernelBook row {row.get('uuid', index)} from {row.get('repo_link') or row.get('repo_name')}"
                              f"@{row.get('sha')}", "kernelbook_module": row.get("module_name")}
    return f'''{row["python_code"].rstrip()}


{MARK}
_amdkv_init = get_init_inputs()
if (isinstance(_amdkv_init, (list, tuple)) and len(_amdkv_init) == 2 and isinstance(_amdkv_init[0], (list, tuple))
        and isinstance(_amdkv_init[1], dict)):
    AMDKV_INIT_ARGS, AMDKV_INIT_KWARGS = list(_amdkv_init[0]), dict(_amdkv_init[1])
else:
    AMDKV_INIT_ARGS, AMDKV_INIT_KWARGS = list(_amdkv_init), {{}}


class Model({entry}):
    def __init__(self):
        super().__init__(*AMDKV_INIT_ARGS, **AMDKV_INIT_KWARGS)


def get_init_inputs():
    return []


METADATA = {metadata!r}
'''


def candidate_source(row: Mapping[str, Any], init_args: list, init_kwargs: dict) -> str:
    """The row's Triton program with a `ModelNew` built like the task's `Model`."""
    entry = _identifier(row["entry_point"])
    for value in (init_args, init_kwargs):
        try:
            if ast.literal_eval(repr(value)) != value:
                raise ValueError
        except (ValueError, SyntaxError):
            raise BadInputError(f"{row['entry_point']}: init arguments {value!r} are not plain literals",
                                hint="this row cannot be adapted (its constructor takes tensors or objects)") from None
    return f'''{row["triton_code"].rstrip()}


{MARK}
class ModelNew({entry}New):
    def __init__(self):
        super().__init__(*{init_args!r}, **{init_kwargs!r})
'''


def _identifier(name: Any) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise BadInputError(f"entry_point {name!r} is not a Python class name", hint="a KernelBook row names its module class")
    return name
