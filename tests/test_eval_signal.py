"""`amdkv eval` on SIGTERM: it stops at once, even while a verification is running. It writes
its metrics and reports over what it finished. What was running is recorded as `infra_error` /
`verifier_closed`, which a re-run verifies again. A real CLI process, a real CPU verifier, and a
task whose reference sleeps (tests/slow_reference.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from slow_reference import COPY_KERNEL, SLEEP_S, TASK_ID, slow_suite, until, workers_labelled

REPO = Path(__file__).resolve().parent.parent


def _eval_cmd(suite: str, samples: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "amdkv.cli", "eval", suite, "--samples", str(samples), "--out", str(out),
            "--device", "cpu", "--json"]


def _env(tmp_path: Path, reference_timeout: int) -> dict[str, str]:
    env = dict(os.environ, AMDKV_CACHE_DIR=str(tmp_path / "cache"), AMDKV_REFERENCE_TIMEOUT=str(reference_timeout),
               AMDKV_VERDICT_CACHE="0")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_sigterm_stops_eval_keeps_its_reports_and_a_rerun_verifies_what_was_cut(tmp_path: Path) -> None:
    suite = slow_suite(tmp_path / "bench")
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": TASK_ID, "samples": [COPY_KERNEL]}) + "\n")
    out = tmp_path / "out"
    proc = subprocess.Popen(_eval_cmd(suite, samples, out), env=_env(tmp_path, SLEEP_S * 2), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert until(lambda: workers_labelled(f"reference {TASK_ID}") or proc.poll() is not None, 120)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert time.monotonic() - sent < SLEEP_S / 4, "it waited for the verification in flight"
    assert proc.returncode == 3, stderr[-3000:]  # EXIT_INFRA: something is left for a re-run
    assert "amdkv eval: SIGTERM: stopping" in stderr
    metrics = json.loads(stdout)
    assert metrics == json.loads((out / "metrics.json").read_text())
    assert (out / "report.md").is_file()
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (record["verdict"]["status"], record["verdict"]["reason"]) == ("infra_error", "verifier_closed")
    assert until(lambda: not workers_labelled(f"reference {TASK_ID}"), 15), "the reference worker outlived the run"

    # the re-run verifies the cut sample again (its reference now runs into a 3-s limit)
    rerun = subprocess.run(_eval_cmd(suite, samples, out), env=_env(tmp_path, 3), cwd=tmp_path, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()[-1:]]
    assert (record["verdict"]["status"], record["verdict"]["reason"]) == ("unverifiable", "reference_timeout")
