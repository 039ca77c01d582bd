"""SIGKILL of `amdkv gen`, then a re-run: exactly the records of an uninterrupted run, and no
request the killed run had completed is sent again (the request cache).

The model server is tests/gen_fake_server.py (real HTTP on loopback, scripted model: a compile
error at turn 0, the fix at turn 1), so the uninterrupted and the resumed run see the same replies."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from gen_support import (PYTHON, REPO, cli, cpu_verifier, env, fake_server, openai_settings,  # noqa: F401
                         run_trajectories)

from amdkv.gen.run import run_gen

TASKS = ("l1_relu", "l1_softmax")  # one task recorded before the kill, one in flight


def _normalised(out) -> list[tuple]:
    """What a record says, without run-dependent timings: ids, every turn's stage, reply, program,
    extraction, verdict status and reason, feedback, and the stop reason."""
    rows = []
    for rec in run_trajectories(out):
        tr = rec["trajectory"]
        turns = tuple((t["stage"], t["reply"], t["code"], t["extraction"], (t["verdict"] or {}).get("status"),
                       (t["verdict"] or {}).get("reason"), t["feedback"]) for t in tr["turns"])
        rows.append((rec["work_key"], tr["trajectory_id"], tr["task_id"], rec["origin"]["sample"], turns,
                     tr["metadata"]["stop_reason"]))
    return rows


def test_sigkill_then_rerun_gives_the_uninterrupted_records(tmp_path, cpu_verifier):
    with fake_server(tmp_path, "--delay-s", "0.3", "--actions", "compile_error,solution") as server:
        reference = tmp_path / "uninterrupted"
        outcome = run_gen(openai_settings(reference, server.base_url, *TASKS, concurrency=1, max_active_tasks=1),
                          verifier=cpu_verifier, progress=False)
        assert outcome.exit_code == 0
        uninterrupted_requests = len([r for r in server.requests() if r["status"] == 200])
        assert uninterrupted_requests == 2 * len(TASKS)

        out = tmp_path / "killed"
        cmd = [PYTHON, "-m", "amdkv.cli", "gen", "triton", "--tasks", "builtin:all",
               *[a for t in TASKS for a in ("--task", t)], "--llm", "openai", "--model", "fake-model",
               "--base-url", server.base_url, "--turns", "2", "--shots", "0", "--device", "cpu", "--concurrency", "1",
               "--active-tasks", "1", "--out", str(out), "--json"]
        proc = subprocess.Popen(cmd, env=env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        shards = out / "records" / "shards"
        deadline = time.monotonic() + 300
        while not any(p.read_text().count("\n") >= 1 for p in shards.glob("*.jsonl")):
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        kept = len(run_trajectories(out))
        assert 1 <= kept < len(TASKS)
        cached = len(list((out / "requests").rglob("*.json")))

        rerun = cli(*cmd[3:])  # the re-run needs no process of its own: the real CLI, in this process
        assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout)
    assert summary["trajectories"]["recorded_now"] == len(TASKS) - kept
    # nothing the killed run had received is asked again
    assert summary["tokens"]["requests"] == uninterrupted_requests - cached
    assert cached >= 2 * kept  # every request of a recorded trajectory was cached before its record
    assert _normalised(out) == _normalised(reference)
