"""SIGKILL of `amdkv gen`, then a re-run: exactly the records of an uninterrupted run, and no
request the killed run had completed is sent again (the request cache). SIGTERM: the run stops at
once, keeps what it recorded, writes its summary, and a re-run continues the same way.

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
STOPPED_RUN_DELAY_S = 6.0  # the fake model's reply time in the SIGTERM test's stopped run


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


def _uninterrupted(tmp_path, server, cpu_verifier):
    """The reference run in-process, and how many requests it answered."""
    reference = tmp_path / "uninterrupted"
    outcome = run_gen(openai_settings(reference, server.base_url, *TASKS, concurrency=1, max_active_tasks=1),
                      verifier=cpu_verifier, progress=False)
    assert outcome.exit_code == 0
    answered = len([r for r in server.requests() if r["status"] == 200])
    assert answered == 2 * len(TASKS)
    return reference, answered


def _started_until_first_record(server, out):
    """`amdkv gen` as a process of its own, returned once its first trajectory is on disk."""
    cmd = [PYTHON, "-m", "amdkv.cli", "gen", "triton", "--tasks", "builtin:all",
           *[a for t in TASKS for a in ("--task", t)], "--llm", "openai", "--model", "fake-model",
           "--base-url", server.base_url, "--turns", "2", "--shots", "0", "--device", "cpu", "--concurrency", "1",
           "--active-tasks", "1", "--out", str(out), "--json"]
    proc = subprocess.Popen(cmd, env=env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    shards = out / "records" / "shards"
    deadline = time.monotonic() + 300
    while not any(p.read_text().count("\n") >= 1 for p in shards.glob("*.jsonl")):
        assert proc.poll() is None, "the run ended before it could be stopped"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return cmd, proc


def test_sigkill_then_rerun_gives_the_uninterrupted_records(tmp_path, cpu_verifier):
    with fake_server(tmp_path, "--delay-s", "0.3", "--actions", "compile_error,solution") as server:
        reference, uninterrupted_requests = _uninterrupted(tmp_path, server, cpu_verifier)
        out = tmp_path / "killed"
        cmd, proc = _started_until_first_record(server, out)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
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


def test_sigterm_stops_at_once_writes_the_summary_and_a_rerun_continues(tmp_path, cpu_verifier):
    """A batch scheduler's time limit: SIGTERM (one signal, to the process only). `amdkv gen` ends
    without waiting for what is in flight (the fake server answers each request after 2 s, so a
    wait would show), abandons it as `interrupted` (exit 3: a re-run continues), and writes its
    summary; the re-run then gives exactly the uninterrupted run's records."""
    with fake_server(tmp_path, "--delay-s", "0.3", "--actions", "compile_error,solution") as server:
        reference, _ = _uninterrupted(tmp_path, server, cpu_verifier)
        server.configure(delay_s=STOPPED_RUN_DELAY_S)  # a request in flight when the signal comes
        out = tmp_path / "stopped"
        cmd, proc = _started_until_first_record(server, out)
        # the next task's request starts a loop turn after the first record is written: signalled in
        # between, it was never sent (`not_started:interrupted`, seen once on a loaded machine); a second
        # later it surely is in flight, and its answer is STOPPED_RUN_DELAY_S away
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=120)
        stop_s = time.monotonic() - sent
        assert proc.returncode == 3, stderr[-3000:]
        assert "SIGTERM: stopping" in stderr
        summary = json.loads(stdout)
        assert summary["stopped"] == "interrupted"
        assert summary["trajectories"]["abandoned_now"] == {"interrupted": 1}
        assert summary == json.loads((out / "summary.json").read_text())
        kept = len(run_trajectories(out))
        assert kept == 1 == summary["tasks"]["complete"]
        # not a speed target: the in-flight request had up to STOPPED_RUN_DELAY_S to go, so waiting for
        # it (the behaviour before SIGTERM was handled: the run went on to its end) takes longer than this
        assert stop_s < STOPPED_RUN_DELAY_S - 1, f"took {stop_s:.1f} s to stop: it waited for work in flight"

        server.configure(delay_s=0.3)
        rerun = cli(*cmd[3:])
        assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert json.loads(rerun.stdout)["trajectories"]["recorded_now"] == len(TASKS) - kept
    assert _normalised(out) == _normalised(reference)
