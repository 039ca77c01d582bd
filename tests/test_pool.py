"""The spare's job protocol (pool.Spare.run): the parent returns when the worker says DONE, without
waiting for the process to exit, and still gets exit codes, timeouts and stderr when there is no DONE.

The workers here are tiny Python scripts standing in for `python -m amdkv.verify.worker` so that the
timings are the protocol's, not torch's import time; the real worker is exercised end to end by
test_verify_cli.py and test_adversarial.py.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from amdkv.verify.platform import detect_platform
from amdkv.verify.pool import STDOUT_KEEP_BYTES, ExecWorkerProcess, Spare
from amdkv.verify.worker import DONE_LINE


def _scripted_spare(body: str) -> Spare:
    """A Spare whose process runs `body` after printing READY (the real constructor starts the
    real worker; here only the process differs)."""
    spare = Spare.__new__(Spare)
    spare.platform = detect_platform("cpu")
    spare.workdir = tempfile.mkdtemp(prefix="amdkv-test-pool-")
    spare.stderr_path = os.path.join(spare.workdir, "worker_stderr.txt")
    script = "import sys, time, os\nprint('READY', flush=True)\nsys.stdin.readline()\n" + body
    spare.proc = ExecWorkerProcess(dict(os.environ), spare.workdir, spare.stderr_path, None,
                                   argv=[sys.executable, "-c", script])
    spare._ready = False
    spare.ready_wait_s = 0.0
    return spare


def test_done_returns_without_waiting_for_exit_and_kills_the_group():
    spare = _scripted_spare(f"sys.stderr.write('diag text\\n'); sys.stderr.flush()\n"
                            f"print('before', flush=True)\nsys.stdout.write({DONE_LINE!r}); sys.stdout.flush()\n"
                            "time.sleep(60)\n")
    try:
        t0 = time.monotonic()
        res = spare.run({"kind": "test"}, timeout=30)
        took = time.monotonic() - t0
        assert took < 10, f"run() waited {took:.1f} s: it must return at DONE, not at exit"
        assert res.returncode == 0 and not res.timed_out
        assert "before" in res.stdout and "AMDKV-WORKER-DONE" not in res.stdout
        assert "diag text" in res.stderr
        code = spare.proc.wait(10)  # the group was SIGKILLed, so the sleeper is gone
        assert code is not None and code < 0
    finally:
        spare.cleanup()


def test_exit_without_done_reports_the_exit_code():
    spare = _scripted_spare("sys.stderr.write('boom\\n'); sys.exit(3)\n")
    try:
        res = spare.run({"kind": "test"}, timeout=30)
        assert res.returncode == 3 and not res.timed_out
        assert "boom" in res.stderr
    finally:
        spare.cleanup()


def test_timeout_without_done_kills_and_says_so():
    spare = _scripted_spare("time.sleep(60)\n")
    try:
        t0 = time.monotonic()
        res = spare.run({"kind": "test"}, timeout=1.5)
        assert res.timed_out and time.monotonic() - t0 < 20
    finally:
        spare.cleanup()


def test_done_after_a_stdout_flood_is_still_seen_and_output_is_bounded():
    spare = _scripted_spare("sys.stdout.write('x' * (3 * 1024 * 1024) + '\\n')\n"
                            f"sys.stdout.write({DONE_LINE!r}); sys.stdout.flush()\ntime.sleep(60)\n")
    try:
        res = spare.run({"kind": "test"}, timeout=30)
        assert res.returncode == 0 and not res.timed_out
        assert len(res.stdout) <= 2 * STDOUT_KEEP_BYTES + 1
    finally:
        spare.cleanup()


def test_done_text_inside_a_line_is_not_the_marker():
    spare = _scripted_spare(f"sys.stdout.write('say ' + {DONE_LINE!r}); sys.stdout.flush()\nsys.exit(5)\n")
    try:
        res = spare.run({"kind": "test"}, timeout=30)
        assert res.returncode == 5, "a DONE that does not start a line must not end the job"
    finally:
        spare.cleanup()
