"""The OpenAI-compatible client and `amdkv gen --llm openai` against a real HTTP server on loopback
that fails on demand (tests/gen_fake_server.py: real FastAPI/uvicorn and the real `openai`
package; the model behind it is scripted, because a real model cannot be told to answer 500,
stall, drop choices or die; the real-model path is tests/test_gen_serve.py).

Covers: n checked and topped up, reasoning kept apart, token accounting, 5xx/429 and timeouts
retried, 4xx not retried, a too-long conversation ending its trajectory, the request cache, a
server killed mid-run (restarted: the run completes; not restarted: the run stops with exit 3
and a re-run completes it).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from gen_support import (FakeServer, cpu_verifier, fake_server, gen_cli, openai_settings,  # noqa: F401
                         run_trajectories, statuses, verifications_judged)

from amdkv.gen.llm import ClientConfigError, RequestContext, SamplingParams, TransientLLMError
from amdkv.gen.openai_client import OpenAIChatClient
from amdkv.gen.retry import RetryPolicy
from amdkv.gen.run import run_gen

FAST_RETRY = RetryPolicy(attempts=4, base_delay=0.05, max_delay=0.2)
MESSAGES = [{"role": "system", "content": "You write kernels."},
            {"role": "user", "content": "## Task `l1_relu`\n\nWrite it."}]


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One server process for the tests that only change its behaviour (`configure`)."""
    with fake_server(tmp_path_factory.mktemp("fake")) as server:
        yield server


def client_for(server: FakeServer, **kw) -> OpenAIChatClient:
    return OpenAIChatClient("fake-model", server.base_url, retry=kw.pop("retry", FAST_RETRY), **kw)


def test_n_is_checked_and_topped_up_reasoning_kept_apart(shared):
    """The server ignores `n` (as `transformers serve` does): the client notices and asks again."""
    with shared.configure(ignore_n=True, reasoning=True) as server:
        client = client_for(server)
        replies = client.chat(MESSAGES, n=3, params=SamplingParams(temperature=1.0, max_tokens=64))
        assert len(replies) == 3
        assert all("```python" in r.content and "class ModelNew" in r.content for r in replies)
        assert all(r.reasoning_content.startswith("Thinking about l1_relu") for r in replies)
        assert all("<think>" not in r.content for r in replies)
        seen = server.requests()
        assert [r["n"] for r in seen] == [3, 2, 1]     # asked for what was still missing each time
        stats = client.stats.to_dict()
        assert stats["requests"] == 3 and stats["short_choices"] == 2 and stats["replies"] == 3
        assert stats["prompt_tokens"] > 0 and stats["completion_tokens"] == sum(r.completion_tokens for r in replies)


def test_n_choices_in_one_response_share_the_tokens(shared):
    with shared.configure() as server:
        client = client_for(server)
        replies = client.chat(MESSAGES, n=2, params=SamplingParams(max_tokens=64))
        assert [r["n"] for r in server.requests()] == [2]
        assert client.stats["short_choices"] == 0
        assert not replies[0].tokens_exact
        assert sum(r.completion_tokens for r in replies) == client.stats["completion_tokens"]


@pytest.mark.parametrize("status", [500, 503, 429])
def test_transient_status_is_retried(shared, status):
    with shared.configure(fail_first=2, fail_status=status) as server:
        client = client_for(server)
        (reply,) = client.chat(MESSAGES)
        assert "class ModelNew" in reply.content
        assert client.stats["retries"] == 2 and client.stats["failures"] == 0
        assert [r["status"] for r in server.requests()] == [status, status, 200]


def test_timeout_is_retried(shared):
    with shared.configure(sleep_first=1, sleep_s=4) as server:
        client = client_for(server, request_timeout=1.0)
        (reply,) = client.chat(MESSAGES)
        assert "class ModelNew" in reply.content
        assert client.stats["retries"] == 1


def test_retries_run_out(shared):
    with shared.configure(fail_first=100, fail_status=502) as server:
        client = client_for(server)
        with pytest.raises(TransientLLMError, match="502"):
            client.chat(MESSAGES)
        assert len(server.requests()) == FAST_RETRY.attempts
        assert client.stats["failures"] == 1


def test_client_errors_are_not_retried(shared):
    with shared.configure() as server:
        client = OpenAIChatClient("no-such-model", server.base_url, retry=FAST_RETRY)
        with pytest.raises(ClientConfigError, match="404") as err:
            client.chat(MESSAGES)
        assert "--model" in str(err.value)
        assert len(server.requests()) == 1


def test_request_cache(shared, tmp_path):
    """Same request: served from the cache. More samples: only the missing ones are asked.
    A failed request stores nothing."""
    from amdkv.gen.request_cache import CachedClient, RequestCache

    with shared.configure(fail_first=1, fail_status=500) as server:
        inner = client_for(server, retry=RetryPolicy(attempts=1))
        client = CachedClient(inner, RequestCache(tmp_path / "cache"))
        with pytest.raises(TransientLLMError):
            client.chat(MESSAGES, n=2)
        assert not any((tmp_path / "cache").rglob("*.json"))
        first = client.chat(MESSAGES, n=2)
        again = client.chat(MESSAGES, n=2)
        assert [r.content for r in again] == [r.content for r in first] and all(r.cached for r in again)
        more = client.chat(MESSAGES, n=3)
        assert [r.cached for r in more] == [True, True, False]
        assert [r["n"] for r in server.requests() if r["status"] == 200] == [2, 1]
        # a later turn of sample 0 and sample 1 with the same conversation are separate entries
        later = [*MESSAGES, {"role": "assistant", "content": "x"}, {"role": "user", "content": "again"}]
        client.chat(later, context=RequestContext("l1_relu", sample=0, turn=1))
        client.chat(later, context=RequestContext("l1_relu", sample=1, turn=1))
        assert len([r for r in server.requests() if r["status"] == 200]) == 4
        assert client.stats["cached_replies"] == 4


def test_gen_cli_through_failing_server(tmp_path):
    """`amdkv gen` end to end through the openai client while the server answers 500 twice and
    ignores `n`: retried and topped up, never stopping the run; a broken first turn is fixed."""
    with fake_server(tmp_path, "--fail-first", "2", "--ignore-n", "--actions", "compile_error,solution") as server:
        out = tmp_path / "run"
        proc = gen_cli("triton", "--tasks", "builtin:all", "--task", "l1_relu", "--llm", "openai",
                       "--model", "fake-model", "--base-url", server.base_url, "--turns", "2", "--samples", "2",
                       "--shots", "0", "--device", "cpu", "--out", str(out), "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)
    recs = run_trajectories(out)
    assert [statuses(r) for r in recs] == [["compile_error", "ok"], ["compile_error", "ok"]]
    assert summary["tokens"]["retries"] == 2 and summary["tokens"]["short_choices"] >= 1
    assert summary["outcomes"]["correct"] == 2 and summary["tasks"]["complete"] == 1
    assert summary["tokens"]["completion_tokens"] > 0
    assert 0.0 <= summary["activity"]["gen_waited_share"] <= 1.0
    assert (out / "summary.json").exists() and (out / "samples.jsonl").exists()


def test_context_too_long_ends_the_trajectory(shared, tmp_path, cpu_verifier):
    """The second request outgrows the server's context: that trajectory ends (recorded with
    stop reason context_length), the run goes on."""
    from amdkv.prompts import PromptConfig, build_messages
    from amdkv.tasks.suites import load_suite

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    limit = sum(len(m["content"]) for m in build_messages(task, PromptConfig(shots=0))) + 50
    shared.configure(max_prompt_chars=limit, actions="compile_error")
    outcome = run_gen(openai_settings(tmp_path / "run", shared.base_url, "l1_relu", turns=3), verifier=cpu_verifier,
                      progress=False)
    assert outcome.exit_code == 0
    (rec,) = run_trajectories(tmp_path / "run")
    assert statuses(rec) == ["compile_error"]
    assert rec["trajectory"]["metadata"]["stop_reason"] == "context_length"


TASKS_2 = ("l1_relu", "l1_softmax")


class _Background:
    """run_gen in a thread (the test kills and restarts the server meanwhile)."""

    def __init__(self, settings, verifier) -> None:
        self.outcome = None
        self.thread = threading.Thread(target=self._run, args=(settings, verifier), daemon=True)
        self.thread.start()

    def _run(self, settings, verifier) -> None:
        self.outcome = run_gen(settings, verifier=verifier, progress=False)

    def result(self, timeout: float = 600):
        self.thread.join(timeout)
        assert self.outcome is not None, "the run did not finish"
        return self.outcome


def _wait_for_requests(server: FakeServer, k: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while len([r for r in server.requests() if r.get("status") == 200]) < k:
        assert time.monotonic() < deadline, "the run sent no requests"
        time.sleep(0.1)


def test_server_killed_and_restarted_mid_run(tmp_path, cpu_verifier):
    """Requests in flight when the server dies are retried with backoff until it is back."""
    server = FakeServer(tmp_path, "--delay-s", "0.5", "--actions", "compile_error,solution").start()
    try:
        run = _Background(openai_settings(tmp_path / "run", server.base_url, *TASKS_2,
                                          retry=RetryPolicy(attempts=20, base_delay=0.5, max_delay=2)), cpu_verifier)
        _wait_for_requests(server, 1)
        server.kill()
        time.sleep(2)
        server.start()  # same port
        outcome = run.result()
    finally:
        server.kill()
    assert outcome.exit_code == 0, outcome.summary["trajectories"]
    assert outcome.summary["tokens"]["retries"] >= 1
    assert [statuses(r) for r in run_trajectories(tmp_path / "run")] == [["compile_error", "ok"]] * 2


def test_server_killed_for_good_then_rerun(tmp_path, cpu_verifier):
    """The server dies and stays dead: the run stops starting work (exit 3, abandoned trajectories
    named) instead of hanging; what finished is kept; a re-run once the server is back completes."""
    server = FakeServer(tmp_path, "--delay-s", "1.0", "--actions", "solution").start()
    out = tmp_path / "run"
    settings = openai_settings(out, server.base_url, *TASKS_2, concurrency=1, max_active_tasks=1, max_llm_failures=2,
                               retry=RetryPolicy(attempts=2, base_delay=0.1, max_delay=0.2))
    try:
        run = _Background(settings, cpu_verifier)
        _wait_for_requests(server, 1)
        server.kill()
        outcome = run.result()
        assert outcome.exit_code == 3
        assert outcome.summary["stopped"] == "llm_unavailable"
        abandoned = outcome.summary["trajectories"]["abandoned_now"]
        assert abandoned.get("llm_unavailable", 0) >= 1
        before = len(run_trajectories(out))
        assert before < 2
        server.start()
        outcome = run_gen(settings, verifier=cpu_verifier, progress=False)
    finally:
        server.kill()
    assert outcome.exit_code == 0
    assert outcome.summary["trajectories"]["recorded_now"] == 2 - before
    assert [statuses(r) for r in run_trajectories(out)] == [["ok", "ok"]] * 2


def test_functional_reference_stage(shared, tmp_path, cpu_verifier):
    """--functional-reference: the functional program is checked against the module under the
    `reference` policy; a correct one (l1_relu) is shown in the write request, a wrong one
    (l1_softmax: softmax over the wrong dimension) is recorded as such and not shown."""
    import dataclasses

    shared.configure(actions="solution")
    base = openai_settings(tmp_path / "run", shared.base_url, "l1_relu", "l1_softmax", turns=1)
    settings = dataclasses.replace(base, agent=dataclasses.replace(base.agent, functional_reference=True))
    outcome = run_gen(settings, verifier=cpu_verifier, progress=False)
    assert outcome.exit_code == 0
    recs = {r["trajectory"]["task_id"]: r["trajectory"] for r in run_trajectories(tmp_path / "run")}
    relu, softmax = recs["l1_relu"], recs["l1_softmax"]
    assert relu["metadata"]["functional_reference"]["status"] == "ok"
    assert "def module_fn(x):" in relu["prompt"][-1]["content"] and "A functional version" in relu["prompt"][-1]["content"]
    assert softmax["metadata"]["functional_reference"]["status"] == "mismatch"
    assert "def module_fn" not in softmax["prompt"][-1]["content"]
    assert [t["verdict"]["status"] for t in relu["turns"]] == ["ok"]
    # 2 functional requests + 2 kernel requests; 2 functional + 2 kernel verifications, plus one
    # more for each verification that came back `infra_error` (the agent verifies that program
    # again; a loaded 2-core CI machine once hit one) -- counted and explained in the summary
    assert outcome.summary["tokens"]["requests"] == 4
    assert verifications_judged(outcome.summary) == 4, outcome.summary["throughput"]
