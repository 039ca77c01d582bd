"""`cancel()`: a verifier stops at once. Its running workers are killed and nothing waits for them.
What they return is `infra_error` / `verifier_closed`, never a candidate's verdict. A later verifier
in the same process does not inherit the killed work as the task's failure. `amdkv gen` calls it on
SIGTERM (docs/gen.md).

Real CPU verifiers and real worker processes: the task's reference (a TritonBench-G style kernel
file, the benchmark's trusted code) sleeps, so the verification is surely in flight when it is
cancelled."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from amdkv.config import VerifierConfig
from amdkv.tasks.suites import load_suite
from amdkv.verify.api import VERIFIER_CLOSED
from amdkv.verify.candidate import Candidate
from amdkv.verify.pool import JOB_LABEL_FILE
from amdkv.verify.scheduler import MultiGpuScheduler
from amdkv.verify.verifier import Verifier

COPY_KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
               "def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n    offs = tl.arange(0, BLOCK)\n"
               "    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n\n\n"
               "def copy(x):\n    y = torch.empty_like(x)\n    k[(1,)](x, y, x.numel(), BLOCK=16)\n    return y\n")
SLEEP_S = 120


def _slow_task(root: Path):
    folder = root / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    reference = COPY_KERNEL.replace("import torch\n", "import time\nimport torch\n").replace(
        "    y = torch.empty_like(x)\n", f"    time.sleep({SLEEP_S})\n    y = torch.empty_like(x)\n")
    (folder / "slowcancel.py").write_text(reference + "\n" + "#" * 146 + "\n\ndef test_copy():\n"
                                          "    return {'a': copy(torch.ones(8, device='cuda'))}\n")
    return load_suite(f"tritonbench-g:{root}")[0]


def _workers_labelled(label: str) -> list[int]:
    """Pids of live processes whose cwd holds a worker job label `label` (pool.JOB_LABEL_FILE)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cwd" / JOB_LABEL_FILE).read_text().strip() == label:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _until(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _single(config: VerifierConfig):
    return Verifier(config)


def _scheduled(config: VerifierConfig):
    return MultiGpuScheduler(lambda i: Verifier(config), [0], config=config)


@pytest.mark.parametrize("open_verifier", [_single, _scheduled], ids=["verifier", "scheduler"])
def test_cancel_kills_running_work_and_returns_at_once(tmp_path: Path, monkeypatch, open_verifier) -> None:
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = _slow_task(tmp_path)
    label = f"reference {task.id}"
    config = VerifierConfig(device="cpu", spares=0, timeout=60, reference_timeout=SLEEP_S * 2, verdict_cache=False)
    verifier = open_verifier(config)
    future = verifier.submit(task, Candidate(COPY_KERNEL))
    queued = verifier.submit(task, Candidate(COPY_KERNEL + "\n# another candidate\n"))
    assert _until(lambda: _workers_labelled(label), 60), "the reference worker never started"

    started = time.monotonic()
    verifier.cancel()
    assert time.monotonic() - started < 10, "cancel() waited for the work in flight"
    for fut in (future, queued):
        verdict = fut.result(timeout=30)
        assert (verdict.status, verdict.reason) == ("infra_error", VERIFIER_CLOSED), verdict.diagnostics
    assert _until(lambda: not _workers_labelled(label), 15), "the reference worker outlived cancel()"
    assert time.monotonic() - started < SLEEP_S / 2

    # a new verifier of this process runs the reference again (the killed run was not remembered as the
    # task's failure): here it runs into its own short reference timeout. (The second parameter then
    # needs a remembered failure to be keyed by the reference timeout: its 240 s is not this 3 s.)
    with Verifier("cpu", spares=0, timeout=60, reference_timeout=3, verdict_cache=False) as fresh:
        again = fresh.verify(task, Candidate(COPY_KERNEL))
    assert (again.status, again.reason) == ("unverifiable", "reference_timeout"), again.diagnostics
