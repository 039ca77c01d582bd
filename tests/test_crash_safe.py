"""Crash-safe runs: `amdkv eval` SIGKILLed at random points, then run again, gives exactly the
results of an uninterrupted run: every sample once in results.jsonl (nothing lost, nothing doubled),
the same verdicts, the same metrics. A killed run leaves no worker process and no temp folder: the
fork server sees its parent's end of the socket close, kills every worker's process group and
removes the workers' folders and the verifier's scratch.

Real runs: `python -m amdkv.cli eval` subprocesses on the cpu platform, killed with SIGKILL (the
eval process alone, as the OOM killer or a cluster scheduler would). The kill times are random (the
seed is printed, so a failure can be replayed with AMDKV_TEST_KILL_SEED).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from amdkv.tasks.builtin import solution_path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "eval"
LINES = [
    {"task_id": "l1_relu", "samples": [solution_path("l1_relu").read_text(), (DATA / "relu_syntax_error.py").read_text()]},
    {"task_id": "l1_layernorm", "samples": [(DATA / "layernorm_wrong_math.py").read_text(),
                                             solution_path("l1_layernorm").read_text()]},
]  # four samples, two tasks: pass, syntax error, wrong math (the cheapest mix that has each outcome)
N_SAMPLES = sum(len(line["samples"]) for line in LINES)


def _env(tmp: Path, mark: str) -> dict[str, str]:
    from amdkv.verify.sandbox import with_package_on_path

    env = with_package_on_path(os.environ)
    env.update(TMPDIR=str(tmp), AMDKV_TEST_RUN_MARK=mark)
    return env


def _start(samples: Path, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "amdkv.cli", "eval", "builtin:all", "--samples", str(samples),
                             "--out", str(out), "--device", "cpu", "--k", "1,2", "--jobs", "2", "--bootstrap", "50",
                             "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _marked_processes(mark: str) -> list[int]:
    """Processes whose environment carries `mark` (every process a run started inherits it)."""
    found = []
    needle = f"AMDKV_TEST_RUN_MARK={mark}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if needle in Path(f"/proc/{entry}/environ").read_bytes():
                found.append(int(entry))
        except OSError:  # gone, or not ours to read
            continue
    return found


def _wait_for_none(mark: str, within_s: float = 20.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while (left := _marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.25)
    return left


def _written(out: Path) -> int:
    path = out / "results.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _results(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def _verdicts(records: list[dict]) -> dict[tuple[str, int], tuple]:
    return {(r["task_id"], r["sample_index"]): (r["verdict"]["status"], r["verdict"]["reason"]) for r in records}


def _metric_numbers(out: Path) -> dict:
    m = json.loads((out / "metrics.json").read_text())
    return {k: v for k, v in m.items() if k not in ("created", "env", "settings")}


def test_eval_killed_at_random_points_then_resumed_equals_an_uninterrupted_run(tmp_path):
    seed = int(os.environ.get("AMDKV_TEST_KILL_SEED", random.SystemRandom().randrange(1 << 30)))
    print(f"kill seed {seed} (replay with AMDKV_TEST_KILL_SEED={seed})")
    rng = random.Random(seed)
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(x) + "\n" for x in LINES))
    tmp = tmp_path / "tmp"
    tmp.mkdir()

    # the uninterrupted run (it also fills the reference cache, as a first run would)
    mark = uuid.uuid4().hex
    t0 = time.monotonic()
    whole = _start(samples, tmp_path / "whole", _env(tmp, mark))
    out, err = whole.communicate(timeout=900)
    duration = time.monotonic() - t0
    assert whole.returncode == 0, err[-3000:]
    expected = _results(tmp_path / "whole")
    assert len(expected) == N_SAMPLES

    # the same run, SIGKILLed twice at random points (after a random number of verdicts are written,
    # plus a random delay: inside a verification, or between two), then run to the end
    killed_out = tmp_path / "killed"
    first = rng.randrange(1, N_SAMPLES // 2 + 1)
    for attempt, after in enumerate((first, rng.randrange(first + 1, N_SAMPLES))):
        mark = uuid.uuid4().hex
        proc = _start(samples, killed_out, _env(tmp, mark))
        deadline = time.monotonic() + duration * 2
        while proc.poll() is None and time.monotonic() < deadline and _written(killed_out) < after:
            time.sleep(0.05)
        delay = rng.uniform(0.0, 1.5)
        time.sleep(delay)
        was_running = proc.poll() is None
        if was_running:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        print(f"run {attempt + 1}: {'killed' if was_running else 'finished before the kill'} "
              f"{delay:.2f} s after {after} verdict(s) were written ({_written(killed_out)} lines)")
        left = _wait_for_none(mark)
        assert not left, f"processes of the killed run are still alive: {left}"
        leftovers = sorted(p.name for p in tmp.iterdir())
        assert not leftovers, f"the killed run left temp folders: {leftovers}"
    mark = uuid.uuid4().hex
    final = _start(samples, killed_out, _env(tmp, mark))
    out, err = final.communicate(timeout=900)
    assert final.returncode == 0, err[-3000:]

    records = _results(killed_out)
    keys = [(r["task_id"], r["sample_index"]) for r in records]
    assert len(keys) == len(set(keys)) == N_SAMPLES, f"lost or doubled: {sorted(keys)}"
    assert _verdicts(records) == _verdicts(expected)
    assert _metric_numbers(killed_out) == _metric_numbers(tmp_path / "whole")
    assert not _wait_for_none(mark) and not list(tmp.iterdir())

