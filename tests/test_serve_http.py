"""`amdkv serve` over real HTTP on loopback: a uvicorn server in a thread of this process
(server.serve_in_background), the real verifier on the cpu platform, real httpx clients.

One verifier serves every test (its verdict cache on, so the repeats a test about the HTTP layer
makes are answered from it: the lead's conftest switches the cache off for the session, this
verifier switches it on explicitly); distinct service instances over it give the different
settings (token, small queue). Few distinct candidates are verified for real: the relu
solution in a couple of comment variants, and candidates the verifier judges without a worker
(syntax error, bf16 on the interpreter).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from amdkv.config import VerifierConfig
from amdkv.errors import BadInputError
from amdkv.serve.client import RemoteVerifier
from amdkv.serve.server import serve_in_background
from amdkv.serve.service import ServeSettings, VerificationService
from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify.candidate import source_sha256
from amdkv.verify.scheduler import open_verifier

TASK_IDS = ("l1_relu", "l1_silu", "l1_softmax")
RELU = solution_path("l1_relu").read_text()
SILU = solution_path("l1_silu").read_text()          # bf16 task: unverifiable on the interpreter
BROKEN = "import torch\nclass ModelNew(torch.nn.Module:\n    pass\n"          # compile_error, no worker
FALLBACK = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
# relu whose import keeps a worker busy for a few seconds (a deadline passes while it runs)
SLOW_RELU = RELU + "\n_spin = sum(range(40_000_000))\n"


def variant(source: str, tag: str) -> str:
    return f"# variant {tag}\n{source}"


@pytest.fixture(scope="module")
def tasks():
    return {tid: load_task(task_path(tid), suite=task_path(tid).parent.name) for tid in TASK_IDS}  # as load_builtin


@pytest.fixture(scope="module")
def verifier():
    with open_verifier(VerifierConfig.from_env(device="cpu", jobs=2, verdict_cache=True)) as v:
        yield v


@pytest.fixture(scope="module")
def make_service(verifier, tasks):
    def make(**settings) -> VerificationService:
        return VerificationService(verifier, list(tasks.values()), ServeSettings(**settings), suite_spec="test-suite")
    return make


@pytest.fixture(scope="module")
def service(make_service):
    return make_service()


@pytest.fixture(scope="module")
def url(service):
    with serve_in_background(service) as u:
        yield u


@pytest.fixture()
def http(url):
    with httpx.Client(base_url=url, timeout=300) as client:
        yield client


def assert_error(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    err = body["error"]
    assert err["code"] == code and err["message"] and "hint" in err and err["type"], body
    return err


# ------------------------------------------------------------------------------ health, tasks
def test_health_names_the_platform_devices_queue_and_versions(http):
    h = http.get("/v1/health").json()
    assert h["protocol"] == "amdkv-serve/1" and h["status"] == "ok"
    assert h["platform"]["name"] == "cpu" and h["is_amd"] is False and h["devices"][0]["name"] == "cpu-interpreter"
    assert h["queue"]["max"] == 512 and h["queue"]["admitted"] >= 0 and h["auth"] == "none"
    assert h["config"]["jobs"] == 2 and h["config"]["verdict_cache"] is True
    assert {"amdkv", "torch", "triton", "fastapi", "uvicorn"} <= set(h["versions"])
    tasks = http.get("/v1/tasks").json()
    assert sorted(t["id"] for t in tasks["tasks"]) == sorted(TASK_IDS)
    assert all("path" not in t and t["source_hash"] for t in tasks["tasks"])


# ------------------------------------------------------------------------------ verify
def test_verify_by_task_id_and_a_retry_with_the_same_request_id_runs_nothing(http, tasks):
    body = {"request_id": "req-relu-1", "task_id": "l1_relu", "task_source_hash": tasks["l1_relu"].source_hash,
            "candidate_source": variant(RELU, "id-replay")}
    before = http.get("/v1/health").json()["counters"]
    first = http.post("/v1/verify", json=body)
    assert first.status_code == 200, first.text
    v = first.json()["verdict"]
    assert v["status"] == "ok" and v["task_id"] == "l1_relu" and v["platform"] == "cpu"
    assert v["candidate_sha256"] == source_sha256(body["candidate_source"]) and first.json()["replayed"] is False
    again = http.post("/v1/verify", json={**body, "options": {"deadline_s": 30.0}})  # a retry sends what is left
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["verdict"] == v  # the same verdict, timings and all: not a second run
    after = http.get("/v1/health").json()["counters"]
    assert after.get("admitted", 0) - before.get("admitted", 0) == 1
    assert after.get("replayed", 0) - before.get("replayed", 0) == 1
    err = assert_error(http.post("/v1/verify", json={**body, "candidate_source": RELU + "\n# other\n"}),
                       409, "request_id_reused")
    assert "different request" in err["message"]


def test_bad_input_gets_clear_4xx_answers_and_the_service_stays_up(http, tasks):
    ok = {"task_id": "l1_relu", "candidate_source": RELU}
    err = assert_error(http.post("/v1/verify", content=b"{not json", headers={"content-type": "application/json"}),
                       400, "malformed_json")
    assert "not valid JSON" in err["message"]
    err = assert_error(http.post("/v1/verify", content=b"[1, 2]", headers={"content-type": "application/json"}),
                       400, "malformed_json")
    assert "must be a JSON object" in err["message"]
    assert_error(http.post("/v1/verify", content=b"plain text"), 400, "malformed_json")
    err = assert_error(http.post("/v1/verify", json={"task_id": "l1_relu"}), 422, "invalid_request")
    assert err["fields"] == [{"field": "candidate_source", "problem": "Field required", "type": "missing"}]
    err = assert_error(http.post("/v1/verify", json={"candidate_source": RELU}), 422, "invalid_request")
    assert "task_id" in err["message"] and "task_source" in err["message"]
    err = assert_error(http.post("/v1/verify", json={**ok, "task_id": 7, "language": "cuda", "colour": "red"}),
                       422, "invalid_request")
    assert {f["field"] for f in err["fields"]} == {"task_id", "language", "colour"}
    err = assert_error(http.post("/v1/verify", json={**ok, "options": {"deadline_s": "10"}}), 422, "invalid_request")
    assert err["fields"][0]["field"] == "options.deadline_s"
    err = assert_error(http.post("/v1/verify", json={**ok, "candidate_source": "x" * (10 << 20)}),
                       413, "request_too_large")
    assert "4194304 bytes" in err["message"]

    def chunked_10mb():  # no Content-Length: the limit is counted while reading
        yield b'{"task_id": "l1_relu", "candidate_source": "'
        for _ in range(10):
            yield b"x" * (1 << 20)
        yield b'"}'

    assert_error(http.post("/v1/verify", content=chunked_10mb(), headers={"content-type": "application/json"}),
                 413, "request_too_large")
    err = assert_error(http.post("/v1/verify", json={**ok, "task_id": "l1_reluu"}), 404, "unknown_task")
    assert "l1_relu" in err["message"] and "/v1/tasks" in err["hint"]
    err = assert_error(http.post("/v1/verify", json={**ok, "task_source_hash": "0" * 16}), 409, "task_source_mismatch")
    assert "task_source" in err["hint"]
    assert_error(http.post("/v1/verify", json={**ok, "options": {"deadline_s": 1e6}}), 422, "invalid_request")
    assert_error(http.post("/v1/verify", json={**ok, "request_id": "has spaces"}), 422, "invalid_request")
    assert_error(http.get("/v1/nothing"), 404, "not_found")
    assert_error(http.get("/v1/verify"), 405, "method_not_allowed")
    assert http.get("/v1/health").status_code == 200


def test_task_source_is_loaded_in_a_sandboxed_process_never_here(http, service, tmp_path):
    """The task text runs only in a sandboxed child: a source that refuses to load in this (the
    service's) process loads fine, and one that writes outside its folder is refused by the OS
    sandbox (the write fails, so the load fails with the reason)."""
    source = task_path("l1_relu").read_text() + (
        f"\nimport os as _os\nassert _os.getpid() != {os.getpid()}, 'task code ran in the service process'\n")
    body = {"task_source": source, "task_id": "my_relu", "candidate_source": variant(RELU, "task-source")}
    loads = service.health()["isolated_task_loads"]
    r = http.post("/v1/verify", json=body)
    assert r.status_code == 200, r.text
    v = r.json()["verdict"]
    assert v["status"] == "ok" and v["task_id"] == "my_relu"
    assert http.post("/v1/verify", json={**body, "candidate_source": RELU}).status_code == 200
    assert service.health()["isolated_task_loads"] == loads + 1  # loaded once for both requests
    marker = tmp_path / "written_by_task.txt"
    writes = task_path("l1_relu").read_text() + f"\nopen({str(marker)!r}, 'w').write('x')\n"
    if "landlock_fs" in v["env"]["sandbox"]["applied"]:  # else the machine cannot refuse the write
        err = assert_error(http.post("/v1/verify", json={**body, "task_source": writes}), 422, "bad_task_source")
        assert "PermissionError" in err["message"] and not marker.exists()
    err = assert_error(http.post("/v1/verify", json={**body, "task_source": "import torch\nx = (\n"}),
                       422, "bad_task_source")
    assert "syntax error" in err["message"]


def test_a_passed_deadline_is_an_infra_error_and_the_run_lands_in_the_cache(http, service):
    body = {"task_id": "l1_relu", "candidate_source": variant(SLOW_RELU, "deadline"), "options": {"deadline_s": 0.5}}
    r = http.post("/v1/verify", json=body)
    assert r.status_code == 504, r.text
    err = r.json()["error"]
    assert err["code"] == "deadline_exceeded" and err["type"] == "infrastructure_error"
    v = r.json()["verdict"]
    assert v["status"] == "infra_error" and v["reason"] == "deadline_exceeded" and v["correct"] is None
    deadline = time.monotonic() + 240
    while service.health()["queue"]["admitted"] and time.monotonic() < deadline:  # the run goes on, holding its slot
        time.sleep(0.5)
    later = http.post("/v1/verify", json={k: v for k, v in body.items() if k != "options"})
    assert later.status_code == 200 and later.json()["verdict"]["status"] == "ok"
    assert later.json()["verdict"]["cache_hit"] is True


def test_batch_answers_in_order_and_is_refused_whole(http):
    items = [{"task_id": "l1_relu", "candidate_source": RELU, "request_id": "b-1"},
             {"task_id": "l1_relu", "candidate_source": BROKEN},
             {"task_id": "l1_silu", "candidate_source": SILU}]
    r = http.post("/v1/verify_batch", json={"items": items})
    assert r.status_code == 200, r.text
    res = r.json()["results"]
    assert [x["status_code"] for x in res] == [200, 200, 200]
    assert [x["verdict"]["status"] for x in res] == ["ok", "compile_error", "unverifiable"]
    assert [x["verdict"]["candidate_sha256"] for x in res] == [source_sha256(i["candidate_source"]) for i in items]
    assert res[0]["request_id"] == "b-1"
    err = assert_error(http.post("/v1/verify_batch", json={"items": [items[0], {**items[1], "task_id": "nope"}]}),
                       404, "unknown_task")
    assert err["message"].startswith("items[1]: ") and err["item"] == 1
    assert_error(http.post("/v1/verify_batch", json={"items": [items[0], items[0]]}), 422, "invalid_request")
    assert_error(http.post("/v1/verify_batch", json={"items": []}), 422, "invalid_request")


# ------------------------------------------------------------------------------ load
def test_a_thousand_requests_at_once_get_verdicts_or_429_and_the_service_stays_up(make_service):
    service = make_service(max_queue=4)
    body = {"task_id": "l1_relu", "candidate_source": variant(SLOW_RELU, "thousand")}  # fresh: one real run

    async def fire(url: str) -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
            return await asyncio.gather(*(client.post("/v1/verify", json=body) for _ in range(1000)))

    with serve_in_background(service) as url:
        answers = asyncio.run(fire(url))
        statuses = [r.status_code for r in answers]
        # how many arrive while the one real run holds the queue depends on the machine's load;
        # requests after it are answered from the cache, each admitted and released at once
        assert set(statuses) <= {200, 429} and statuses.count(200) >= 1 and statuses.count(429) >= 100
        for r in answers:
            if r.status_code == 429:
                assert int(r.headers["Retry-After"]) >= 1 and r.json()["error"]["code"] == "queue_full"
            else:
                assert r.json()["verdict"]["status"] == "ok"
        health = httpx.get(f"{url}/v1/health").json()
        assert health["counters"]["queue_full"] == statuses.count(429)
        assert health["counters"]["admitted"] == statuses.count(200)  # every verdict was admitted, no 429 was
        assert health["queue"]["admitted"] == 0


# ------------------------------------------------------------------------------ auth
def test_a_token_is_required_when_set_and_compared_exactly(make_service):
    assert ServeSettings(token="s3cret").auth == "bearer"
    with pytest.raises(BadInputError, match="no token is set"):
        ServeSettings(host="0.0.0.0").check()
    assert ServeSettings(host="::1").check() and ServeSettings(host="0.0.0.0", token="t").check()
    service = make_service(token="s3cret")
    with serve_in_background(service) as url:
        r = httpx.get(f"{url}/v1/health")
        assert_error(r, 401, "unauthorized")
        assert r.headers["WWW-Authenticate"] == "Bearer"
        assert_error(httpx.get(f"{url}/v1/health", headers={"Authorization": "Bearer s3creT"}), 401, "unauthorized")
        assert_error(httpx.post(f"{url}/evaluate", json={}), 401, "unauthorized")
        assert httpx.get(f"{url}/v1/health", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        with pytest.raises(BadInputError, match="refused the token"):
            RemoteVerifier(url, token="wrong")
        with RemoteVerifier(url, token="s3cret") as rv:
            assert rv.verify(load_task(task_path("l1_relu")), source=RELU).status == "ok"
    with serve_in_background(make_service(token="s3cret", evaluate_open=True)) as url:
        assert httpx.get(f"{url}/health").json()["status"] == "ready"
        assert_error(httpx.get(f"{url}/v1/health"), 401, "unauthorized")


# ------------------------------------------------------------------------------ AMDKernelVault
def test_amdkernelvault_evaluate_shape(http):
    def evaluate(code: str, filename: str = "l1_relu.py", **extra) -> httpx.Response:
        return http.post("/evaluate", json={"protocol_version": 1, "code": code, "filename": filename,
                                            "atol": 0.5, "rtol": 0.25, **extra})

    r = evaluate(RELU)
    assert r.status_code == 200 and set(r.json()) == {"protocol_version", "result"} and r.json()["protocol_version"] == 1
    res = r.json()["result"]
    assert set(res) == {"compiled", "correct", "speedup", "latency_ms", "baseline_latency_ms", "feedback",
                        "error_type", "diagnostics"}
    assert res["compiled"] is True and res["correct"] is True and res["error_type"] is None
    assert res["speedup"] is None and res["latency_ms"] is None  # the cpu platform does not time
    d = res["diagnostics"]
    assert d["platform"] == "cpu" and d["is_amd"] is False and d["task_id"] == "l1_relu"
    assert d["requested_tolerance"] == {"atol": 0.5, "rtol": 0.25, "applied": False, "note": d["requested_tolerance"]["note"]}
    bad = evaluate(FALLBACK, "general/l1_relu.py").json()["result"]
    assert bad["correct"] is False and bad["error_type"] == "hack_detected" and bad["speedup"] is None
    broken = evaluate(BROKEN).json()["result"]
    assert (broken["compiled"], broken["correct"], broken["error_type"]) == (False, False, "compile_error")
    r = evaluate(SILU, "l1_silu.py")
    assert r.status_code == 422 and r.json()["protocol_version"] == 1 and r.json()["error"]["type"] == "unverifiable"
    assert_error(evaluate(RELU, "rocm/l1_relu.py"), 404, "unknown_task")   # wrong suite folder
    assert_error(evaluate(RELU, "../l1_relu.py"), 400, "invalid_request")
    assert_error(evaluate(RELU, "l1_relu.py", extra_field=1), 422, "invalid_request")
    assert_error(http.post("/evaluate", json={"protocol_version": 2, "code": RELU, "filename": "l1_relu.py",
                                              "atol": 0, "rtol": 0}), 422, "invalid_request")
    assert http.get("/health").json() == {"protocol_version": 1, "status": "ready", "gpu": ["cpu"]}


# ------------------------------------------------------------------------------ RemoteVerifier
def test_remote_verifier_8_threads_x_25_submissions_none_lost_or_swapped(url, tasks):
    cases = [(tasks["l1_relu"], variant(RELU, "t-a"), "ok"), (tasks["l1_relu"], variant(RELU, "t-b"), "ok"),
             (tasks["l1_relu"], BROKEN, "compile_error"), (tasks["l1_silu"], SILU, "unverifiable")]
    results: dict[tuple[int, int], tuple[int, object]] = {}
    lock = threading.Lock()
    with RemoteVerifier(url) as rv:
        assert rv.platform.name == "cpu" and rv.config.jobs == 2

        def worker(t: int) -> None:
            futures = [(k, (t + k) % len(cases), rv.submit(cases[(t + k) % len(cases)][0],
                                                           source=cases[(t + k) % len(cases)][1])) for k in range(25)]
            for k, which, fut in futures:
                with lock:
                    results[(t, k)] = (which, fut.result())

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert len(results) == 200
    for which, verdict in results.values():
        task, source, status = cases[which]
        assert (verdict.task_id, verdict.candidate_sha256, verdict.status) == (task.id, source_sha256(source), status), (
            f"{verdict.reason}: {verdict.diagnostics[-3000:]}")


def test_remote_verifier_sends_task_source_when_the_server_lacks_the_task(url, tasks, tmp_path):
    changed = dataclasses.replace(tasks["l1_relu"], source=tasks["l1_relu"].source + "\n# a local edit\n")
    with RemoteVerifier(url) as rv:
        v = rv.verify(changed, source=RELU)
        assert v.status == "ok" and v.task_id == "l1_relu"
        assert (changed.id, changed.source_hash) in rv._needs_source
        cand = tmp_path / "cand.py"
        cand.write_text(RELU)
        v = rv.verify(str(task_path("l1_relu")), str(cand))  # a task path travels as its text
        assert v.status == "ok" and v.task_id.startswith("task_")
        with pytest.raises(BadInputError, match="looks like program text"):
            rv.submit(changed, RELU)


def test_remote_verifier_waits_out_a_full_queue(make_service, tasks):
    service = make_service(max_queue=1)
    # max_in_flight above the server's queue: by default a client sends no more than the queue takes
    with serve_in_background(service) as url, RemoteVerifier(url, retries=0, max_in_flight=4) as rv:
        slow = rv.submit(tasks["l1_relu"], source=variant(SLOW_RELU, "queue"))
        while service.health()["queue"]["admitted"] == 0 and not slow.done():
            time.sleep(0.05)
        quick = rv.verify(tasks["l1_relu"], source=RELU)  # 429 first, then admitted when the slow one is done
        assert quick.status == "ok" and slow.result().status == "ok"
        assert service.health()["counters"]["queue_full"] >= 1


# ------------------------------------------------------------------------------ amdkv eval
def test_eval_cli_verifies_through_the_service(url, tmp_path):
    from amdkv.cli import main

    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "l1_relu", "samples": [RELU, BROKEN]}) + "\n")
    out = tmp_path / "out"
    args = ["eval", str(task_path("l1_relu")), "--samples", str(samples), "--out", str(out)]
    r = CliRunner().invoke(main, args + ["--verifier-url", url, "--json"])
    assert r.exit_code == 0, r.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["platform"] == "cpu" and metrics["settings"]["verifier_url"] == url
    assert metrics["status_counts"] == {"compile_error": 1, "ok": 1}
    r = CliRunner().invoke(main, args + ["--verifier-url", url, "--trials", "5"])
    assert r.exit_code == 2 and "--trials" in r.output
