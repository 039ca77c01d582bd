"""benchmarks/gen_gpu.py's parts that decide what a GPU call measures, run here for real: the phase
plan, the readiness check against a real HTTP server on loopback, and the GPU-memory sampler. The
sampler reads `nvidia-smi`, which this machine lacks (no NVIDIA GPU): a stand-in script of that name
prints the CSV the real tool prints, the one boundary these tests cannot reach."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench_scripts import load_benchmark_script
from gen_support import free_port

REPO = Path(__file__).resolve().parent.parent


def _script():
    return load_benchmark_script("gen_gpu")


gen_gpu = _script()


def test_phases_keep_their_order_and_share_the_budget() -> None:
    assert list(gen_gpu.parse_phases("replay:1,model:3")) == ["replay", "model"]
    assert gen_gpu.parse_phases("replay:1,model:3") == {"replay": 0.25, "model": 0.75}
    assert gen_gpu.parse_phases("model") == {"model": 1.0}
    for bad, says in (("modle:1", "unknown phase"), ("model:x", "not PHASE:SHARE"), ("model:0", "positive"),
                      ("", "at least one")):
        with pytest.raises(SystemExit, match=says):
            gen_gpu.parse_phases(bad)


SERVER = '''
import http.server, json, sys
CHAT = int(sys.argv[2])
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        # like transformers serve on a machine with no HF cache: the model list fails, health answers
        self._send(200, {"status": "ok"}) if self.path == "/health" else self._send(500, {"error": "CacheNotFound"})
    def do_POST(self):
        length = int(self.headers["Content-Length"]); json.loads(self.rfile.read(length))
        self._send(CHAT, {"choices": [{"message": {"role": "assistant", "content": "p"}}]} if CHAT == 200
                   else {"error": "model failed to load"})
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


@pytest.mark.parametrize("chat_status", [200, 500])
def test_ready_means_health_then_an_answered_chat_request(tmp_path: Path, chat_status: int) -> None:
    port = free_port()
    (tmp_path / "server.py").write_text(SERVER)
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "server.py"), str(port), str(chat_status)],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        ready, why = gen_gpu.wait_until_serving(proc, f"http://127.0.0.1:{port}", "m", 30, log)
    finally:
        proc.kill()
        proc.wait()
    if chat_status == 200:
        assert (ready, why) == (True, "")  # a failing /v1/models does not hold it back
    else:
        assert not ready and "answered 500 to a chat request" in why and "failed to load" in why


def test_a_server_that_exits_is_reported_with_its_output(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; print('no model here'); sys.exit(3)"],
                                stdout=out, stderr=subprocess.STDOUT)
    ready, why = gen_gpu.wait_until_serving(proc, f"http://127.0.0.1:{free_port()}", "m", 30, log)
    assert not ready and "exited (rc 3)" in why and "no model here" in why


def test_gpu_memory_sampler_names_the_largest_holders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amdkv.verify.pool import JOB_LABEL_FILE

    work = tmp_path / "worker"  # a real process whose cwd holds a verifier worker's job label
    work.mkdir()
    (work / JOB_LABEL_FILE).write_text("reference l1_big\n")
    proc = subprocess.Popen(["sleep", "30"], cwd=work)
    holder = proc.pid  # its command line and cwd are read from /proc
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo "70000, 81559" ;;
  --query-compute-apps=*) echo "{holder}, 51000"; echo "999999, 700" ;;
esac
""")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    sampler = gen_gpu.GpuMemorySampler(tmp_path / "gpu_mem.csv", every_s=0.05)
    sampler.phase = "model"
    sampler.start()
    time.sleep(0.5)
    summary = sampler.stop()
    proc.kill()
    proc.wait()
    assert summary["peak_used_mib"] == 70000 and summary["processes_seen"] == 2
    top = summary["top_processes"][0]
    assert (top["pid"], top["mib"], top["phase"]) == (holder, 51000, "model") and "sleep" in top["cmd"]
    assert top["job"] == "reference l1_big" and summary["top_processes"][1]["job"] is None
    rows = (tmp_path / "gpu_mem.csv").read_text().splitlines()
    assert rows[0].startswith("time,phase") and f",model,70000,81559,{holder},51000" in rows[1]


def test_continuous_batching_gets_a_kv_cache_cap_from_the_real_cli() -> None:
    """`transformers serve --continuous-batching` takes 90% of the GPU's free memory for its KV cache by
    default, which starves the verifier on the same GPU: the script adds a cap when this transformers'
    `serve` has the flag (read from its real --help), and keeps a cap or a non-CB setting the user gave."""
    exe = Path(sys.executable).parent / "transformers"
    if not exe.exists():
        pytest.skip("no `transformers` CLI beside this Python (it comes with the transformers package; this test reads that CLI's real --help, so there is nothing to check without it)")
    env = dict(os.environ)
    capped = gen_gpu.kv_cache_cap(str(exe), ["--continuous-batching"], env)
    assert capped == ["--continuous-batching", "--cb-max-memory-percent", str(gen_gpu.KV_CACHE_SHARE)]
    assert gen_gpu.kv_cache_cap(str(exe), ["--continuous-batching", "--cb-num-blocks=8"], env) == [
        "--continuous-batching", "--cb-num-blocks=8"]
    assert gen_gpu.kv_cache_cap(str(exe), [], env) == []


def test_verifier_workers_carry_their_jobs_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the sampler reads: every reference and candidate worker is told whose job it runs."""
    from amdkv.tasks.builtin import solution_path, task_path
    from amdkv.tasks.loader import load_task
    from amdkv.verify import pool
    from amdkv.verify.candidate import Candidate
    from amdkv.verify.verifier import Verifier

    labels: list[str] = []
    real_run = pool.Spare.run

    def run(self, job, timeout, label=None):
        result = real_run(self, job, timeout, label)
        labels.append(label)
        return result

    monkeypatch.setattr(pool.Spare, "run", run)
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    with Verifier("cpu", jobs=1, verdict_cache=False, trials=1) as verifier:
        verdict = verifier.verify(load_task(task_path("l1_relu")), Candidate(solution_path("l1_relu").read_text()))
    assert verdict.status == "ok"
    assert labels == ["reference l1_relu", "candidate l1_relu"]


def test_a_phase_in_a_state_folder_continues_in_the_next_call(tmp_path: Path) -> None:
    """`--state`: the phase's run folder lives outside the call's OUT, so a second call continues it
    (only the task the first call did not select is generated now) and each call's OUT gets a copy.
    Real `amdkv gen` (scripted replay) and the real CPU verifier."""
    import argparse

    from gen_support import env

    state = tmp_path / "state"
    replay = ["--llm", "replay", "--turns", "1", "--shots", "0"]

    def call(n: int, task_ids: list[str]) -> dict:
        common = argparse.Namespace(tasks="builtin:all", task_ids=task_ids, device="cpu", jobs=1, concurrency=2,
                                    state=str(state))
        out = tmp_path / f"out{n}"
        out.mkdir()
        phase = gen_gpu.gen_phase("replay", "triton", replay, out, env(), 300.0, common,
                                  hard_deadline=time.monotonic() + 600)
        assert phase["rc"] == 0 and phase["stopped"] is None, phase
        assert (out / "replay" / "summary.json").is_file() and (out / "replay" / "records").is_dir()
        return phase["summary"]

    assert gen_gpu.STATE_MODEL_DIR not in gen_gpu.PHASES  # the model's folder is no phase's run folder
    first = call(1, ["l1_relu"])
    assert first["tasks"]["complete"] == 1 and first["trajectories"]["recorded_now"] == 1
    second = call(2, ["l1_relu", "l1_silu"])
    assert second["tasks"]["complete"] == 2 and second["trajectories"]["recorded_now"] == 1
    assert "(1)" in gen_gpu.table([{"phase": "replay", "wall_s": 1.0, "summary": second}], "cpu")
    assert "stopped early" not in gen_gpu.table([{"phase": "replay", "wall_s": 1.0, "summary": second}], "cpu")
    cut = {"phase": "replay", "wall_s": 1.0, "stopped": "SIGTERM after 300 s", "summary": {**second, "stopped": "interrupted"}}
    assert "- replay: stopped early (interrupted; SIGTERM after 300 s)" in gen_gpu.table([cut], "cpu")
