"""`amdkv serve` as the separate process it is in production (server.ServeProcess: `python -m
amdkv.cli serve`, real HTTP on loopback, cpu platform): a `kill -9` of the service in the middle of
a batch makes the client raise an infrastructure error for every unanswered submission (never a
verdict), and a service restarted on the same port answers the same client again. Plus the CLI's
refusals and its light import."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait

import pytest
from click.testing import CliRunner

from amdkv.errors import InfrastructureError
from amdkv.serve.client import RemoteVerifier
from amdkv.serve.server import ServeProcess
from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify.candidate import source_sha256

RELU = solution_path("l1_relu").read_text()


@pytest.mark.slow
def test_kill_9_mid_batch_raises_infrastructure_errors_and_a_restarted_service_answers(tmp_path):
    task = load_task(task_path("l1_relu"))
    args = ["--device", "cpu", "--jobs", "1", "--tasks", str(task_path("l1_relu")), "--no-verdict-cache"]
    server = ServeProcess(*args, "--port", "0", log_path=tmp_path / "serve.log").start()
    try:
        with RemoteVerifier(server.url, retries=2, backoff_s=0.2) as rv:
            sources = [f"# batch item {i}\n{RELU}" for i in range(4)]  # fresh: each one runs (~1-5 s here)
            futures = [rv.submit(task, source=s) for s in sources]
            # one answered (whichever the service took first: the four arrive concurrently, so the first
            # submitted need not be the first run, and waiting for it could see all four done), the rest
            # queued or running...
            first, _ = wait(futures, timeout=300, return_when=FIRST_COMPLETED)
            assert first, "no submission answered within 300 s"
            server.kill()                   # ...when the service dies
            answered, raised = [], []
            for fut, src in zip(futures, sources):
                try:
                    verdict = fut.result(timeout=120)
                except InfrastructureError as exc:
                    raised.append(str(exc))
                else:
                    answered.append(verdict)
                    assert verdict.status == "ok" and verdict.candidate_sha256 == source_sha256(src)
            assert raised, "every submission was answered before the kill: nothing was tested"
            assert all("failed 3 time(s) in a row" in msg for msg in raised), raised
            assert len(answered) + len(raised) == 4

            restarted = ServeProcess(*args, "--port", str(server.port), log_path=tmp_path / "serve2.log").start()
            try:
                assert restarted.url == server.url
                verdict = rv.verify(task, source=sources[-1])  # the same client, its pooled connections dead
                assert verdict.status == "ok" and verdict.candidate_sha256 == source_sha256(sources[-1])
            finally:
                restarted.stop()
    finally:
        server.stop()


def test_serve_refuses_to_start_on_a_network_address_without_a_token(monkeypatch):
    from amdkv.cli import main

    monkeypatch.delenv("AMDKV_SERVE_TOKEN", raising=False)
    t0 = time.monotonic()
    r = CliRunner().invoke(main, ["serve", "--host", "0.0.0.0"])
    assert r.exit_code == 2 and "no token is set" in r.output and "AMDKV_SERVE_TOKEN" in r.output
    assert time.monotonic() - t0 < 5  # refused before any verifier or suite was opened


def test_cli_help_does_not_import_the_web_stack():
    code = ("import sys; from click.testing import CliRunner; from amdkv.cli import main; "
            "r = CliRunner().invoke(main, ['--help']); assert 'serve' in r.output, r.output; "
            "r = CliRunner().invoke(main, ['serve', '--help']); assert r.exit_code == 0 and "
            "'AMDKV_SERVE_TOKEN' in r.output, r.output; "
            "bad = [m for m in ('fastapi', 'uvicorn', 'httpx', 'starlette', 'torch') if m in sys.modules]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("argv, message", [
    (["serve", "--port", "70000"], "70000"),
    (["serve", "--max-queue", "0"], "--max-queue"),
])
def test_serve_rejects_bad_options(argv, message):
    from amdkv.cli import main

    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and message in r.output
