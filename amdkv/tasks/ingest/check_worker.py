"""`python -m amdkv.tasks.ingest.check_worker TASK_FILE REPORT_JSON TRIALS`: the checks of one
ingested row, in the sandboxed process amdkv.tasks.ingest.pipeline starts for it.

The row's code is untrusted: this process has its own process group, a host-memory cap and a
timeout (amdkv.verify.sandbox.run_python_module), and before the task file is imported the
verifier's audit-hook file guard refuses opening files outside the Python installation, the task
file and this process's work dir, and refuses sockets and subprocesses. It contains accidents and
ordinary misbehaviour (a row that downloads weights, writes files, forks, loops or eats memory);
like every in-process guard it is not a boundary against code written to attack amdkv itself, and
the worst such code could do here is to make its own row look good (the verifier judges the row
again, with its own workers, whenever the task is used).
"""

from __future__ import annotations

import json
import os
import sys
import time


def _write_report(path: str, report: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(report, f)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    task_file, report_path, trials = argv[0], argv[1], int(argv[2])
    import torch

    torch.set_num_threads(1)
    from amdkv.tasks.checks import check_reference
    from amdkv.tasks.loader import load_task
    from amdkv.verify.runtime_guards import FileAccessGuard
    from amdkv.verify.worker_jobs import _readable_roots  # the verifier's own list of harmless roots

    import importlib.util

    sys.dont_write_bytecode = True
    workdir = os.getcwd()
    protected = [report_path, report_path + ".tmp"]
    # importing the task probes for its bytecode cache beside it: refused without counting (a stale
    # .pyc must not stand in for the source), as the verifier's worker does for candidates
    pyc = [importlib.util.cache_from_source(task_file)]
    guard = FileAccessGuard(readable=_readable_roots(task_file), writable=[workdir],
                            refused_quietly=pyc, protected=protected)
    guard.install()
    t0 = time.monotonic()
    report: dict = {"ok": False, "reason": None, "message": ""}
    guard.enabled = True
    try:
        task = load_task(task_file, suite="ingested")
        ref = check_reference(task, trials=trials, workdir=workdir)
        report.update(ok=ref.ok, reason=ref.reason, message=ref.message, input_dtypes=ref.input_dtypes,
                      output_shapes=ref.output_shapes)
    except BaseException as exc:  # noqa: BLE001 - whatever the row's code raises is the finding
        from amdkv.errors import TaskFormatError

        # import_error: the module imports something missing; load_error: its module-level code,
        # get_init_inputs() or get_cases() raised while the task was loaded
        reason = "task_format" if isinstance(exc, TaskFormatError) else \
            "import_error" if isinstance(exc, ImportError) else "load_error"
        report.update(reason=reason, message=f"{type(exc).__name__}: {exc}"[:1500])
    finally:
        guard.enabled = False
    if guard.violations:
        report.update(ok=False, reason="sandbox_violation",
                      message="the row tried to use files, sockets or processes: " + "; ".join(guard.violations[:5]))
    report["seconds"] = round(time.monotonic() - t0, 3)
    _write_report(report_path, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
