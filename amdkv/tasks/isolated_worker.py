"""`python -m amdkv.tasks.isolated_worker TASK_FILE OUT_JSON`: load one task file and write its
description (isolated.describe_task) or the error, for isolated.load_task_isolated.

Runs in a sandboxed child process: the task's import happens here, never in the caller."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    task_file, out_path = argv
    from amdkv.errors import AmdkvError
    from amdkv.tasks.isolated import describe_task
    from amdkv.tasks.loader import load_task

    try:
        report = {"task": describe_task(load_task(task_file))}
        code = 0
    except AmdkvError as exc:
        report, code = {"error": {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}}, 1
    except BaseException as exc:  # noqa: BLE001 - the task's own exception is the client's answer
        report = {"error": {"type": type(exc).__name__, "message": f"importing it raised {type(exc).__name__}: {exc}",
                            "hint": "load the file locally with `amdkv tasks list --from FILE`"}}
        code = 1
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(report, fh)
    os.replace(tmp, out_path)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
