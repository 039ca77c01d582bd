"""Shared helpers of the generation tests: a loopback fake OpenAI server process, free ports, a
CPU verifier, reading a run folder's trajectories back.

Use: `from gen_support import ...` (tests/ is on sys.path when pytest runs)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before answering {url}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


class FakeServer:
    """tests/gen_fake_server.py in a subprocess on a free loopback port."""

    def __init__(self, tmp: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.log = tmp / f"requests-{self.port}.jsonl"
        self.args = args
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FakeServer":
        cmd = [PYTHON, str(REPO / "tests" / "gen_fake_server.py"), "--port", str(self.port), "--log", str(self.log),
               *self.args]
        self.proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_http(self.base_url + "/models", proc=self.proc)
        return self

    def configure(self, **settings: Any) -> "FakeServer":
        """Set the behaviour for the next requests (options of gen_fake_server.py, with
        underscores); unnamed ones go back to the command line's values; the log is emptied."""
        r = httpx.post(self.base_url.removesuffix("/v1") + "/control", json=settings, timeout=30)
        r.raise_for_status()
        return self

    def __enter__(self) -> "FakeServer":  # `with server.configure(...) as server:` scopes a test's settings
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]


@contextlib.contextmanager
def fake_server(tmp: Path, *args: str) -> Iterator[FakeServer]:
    server = FakeServer(tmp, *args).start()
    try:
        yield server
    finally:
        server.kill()


def run_trajectories(out: Path) -> list[dict[str, Any]]:
    """The trajectory records of a run folder, sorted by task and sample."""
    from amdkv.data.records import TRAJECTORY
    from amdkv.data.store import open_store

    recs = list(open_store(out).dicts(TRAJECTORY))
    return sorted(recs, key=lambda r: (r["trajectory"]["task_id"], r["origin"]["sample"]))


def statuses(record: dict[str, Any]) -> list[str | None]:
    """Per turn: the verdict status, or `extraction:<reason>` when no program was taken."""
    out = []
    for t in record["trajectory"]["turns"]:
        out.append(f"extraction:{t['extraction']}" if t["code"] is None else (t["verdict"] or {}).get("status"))
    return out


def cli(*args: str) -> subprocess.CompletedProcess:
    """`amdkv ARGS` through the real CLI, in this process (click's CliRunner): no interpreter, torch
    and triton start-up per call (~5-10 s on a shared 2-core machine). Returns what subprocess.run
    would: returncode, stdout, stderr (with the traceback of an unexpected exception)."""
    import traceback

    from click.testing import CliRunner

    from amdkv.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["amdkv", *map(str, args)], result.exit_code, result.stdout, stderr)


def gen_cli(*args: str) -> subprocess.CompletedProcess:
    """`amdkv gen ARGS` (see `cli`)."""
    return cli("gen", *args)


@pytest.fixture(scope="module")
def cpu_verifier():
    """One local CPU verifier per test module (Triton interpreter), shared by its in-process runs."""
    from amdkv.config import VerifierConfig
    from amdkv.verify.scheduler import open_verifier

    with open_verifier(VerifierConfig.from_env(device="cpu", jobs=2)) as verifier:
        yield verifier


def openai_settings(out: Path, base_url: str, *task_ids: str, turns: int = 2, samples: int = 1,
                    concurrency: int = 2, **kw: Any):
    """GenSettings of a Triton run through the OpenAI client (0 shots: short prompts)."""
    from amdkv.gen.agent import AgentConfig
    from amdkv.gen.pipeline import PipelineSettings
    from amdkv.gen.run import GenSettings
    from amdkv.prompts import PromptConfig

    agent = AgentConfig(language="triton", prompt=PromptConfig(shots=0), turns=turns, samples=samples)
    pipeline = PipelineSettings(llm_concurrency=concurrency, **{k: kw.pop(k) for k in list(kw)
                                                                if k in ("max_active_tasks", "max_llm_failures")})
    return GenSettings(tasks="builtin:all", task_ids=task_ids, out=str(out), llm="openai", model="fake-model",
                       base_url=base_url, agent=agent, pipeline=pipeline, **kw)


def verifications_judged(summary: dict) -> int:
    """Verifications of a run that ended in a judgement: a verification that came back
    `infra_error` (a loaded CI machine can make a worker miss its start) is verified again by the
    agent and counted in the summary's `infra_errors`; tests that count verifications count these."""
    thr = summary["throughput"]
    assert len(thr["infra_error_details"]) == min(thr["infra_errors"], 20), thr
    return thr["verifications"] - thr["infra_errors"]

