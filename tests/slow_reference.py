"""A task whose reference sleeps, and how to see its worker from outside: for the tests that stop
a verification in flight (`cancel()`, `amdkv eval` on SIGTERM). The task is a TritonBench-G style
kernel file (the benchmark's trusted code); real worker processes, nothing mocked."""

from __future__ import annotations

import time
from pathlib import Path

from amdkv.tasks.suites import load_suite
from amdkv.verify.pool import JOB_LABEL_FILE

COPY_KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
               "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
               "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n\n\n"
               "def copy(x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, x.numel(), BLOCK=16)\n    return y\n")
SLEEP_S = 120
TASK_ID = "slowcancel"


def slow_suite(root: Path) -> str:
    """Writes the suite under `root`; returns its spec. Its one task's reference sleeps SLEEP_S."""
    folder = root / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    reference = COPY_KERNEL.replace("import torch\n", "import time\nimport torch\n").replace(
        "    y = torch.empty_like(x)\n", f"    time.sleep({SLEEP_S})\n    y = torch.empty_like(x)\n")
    (folder / f"{TASK_ID}.py").write_text(reference + "\n" + "#" * 146 + "\n\ndef test_copy():\n"
                                          "    return {'a': copy(torch.ones(8, device='cuda'))}\n")
    return f"tritonbench-g:{root}"


def slow_task(root: Path):
    return load_suite(slow_suite(root))[0]


def workers_labelled(label: str, descendants_of: int | None = None) -> list[int]:
    """Pids of live processes whose cwd holds the worker job label `label` (pool.JOB_LABEL_FILE);
    with `descendants_of`, only that process's descendants (a test that kills workers must not reach
    another test's, which may run the same task beside it under xdist)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cwd" / JOB_LABEL_FILE).read_text().strip() == label:
                pids.append(int(proc.name))
        except OSError:
            continue
    return [p for p in pids if descendants_of is None or _descends_from(p, descendants_of)]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid == ancestor:
            return True
    return False


def until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()
