"""One GPU call: `amdkv gen` over every bundled task with a served model and with replay; tasks per
minute, tokens per second and the share of wall time generation waited for verification
(docs/gen.md, "Measured").

    python3 benchmarks/gen_gpu.py --out OUT --wheels wheels/ [--model CHECKPOINT] [--tasks builtin:all]
        [--budget-s 330] [--jobs 8] [--concurrency 16] [--device auto]

Phases, one after another, each with its own wall budget (`amdkv gen --max-wall`: past it nothing
new starts and the run says so; a cut phase reports what it finished):

0. the model: `--model` (a checkpoint folder, e.g. the best this project has trained), else the
   `smoke` tiny Qwen3 (amdkv.train.tiny_model, 21 M parameters) trained here for `--overfit-s`
   seconds to answer each task's `write` request (0 shots) with the task's bundled Triton
   solution in a fence: a model that really answers with kernels, some of them right, so that
   verification has real work (a random model answers with nothing to verify);
1. the server: vLLM's OpenAI server if `vllm` imports, else `transformers serve` (its `[serving]`
   extra comes from --wheels), else the local transformers client in-process (`--llm hf`);
2. `model`: `amdkv gen triton --tasks SUITE --llm openai ... --turns N --shots 0 --temperature 0` (`--model-turns`);
3. `replay`: `amdkv gen triton --tasks SUITE --llm replay --turns 2` (scripted: bundled solutions);
4. `replay_hip`: `amdkv gen hip --llm replay --turns 1` (HIP through the project's HIP-on-CUDA layer).
The verdict cache is off (AMDKV_VERDICT_CACHE=0), so every phase verifies for real.

Longer than one call: `--state /tmp/amdkv-gen-state` keeps the trained model and every phase's run
folder outside OUT; the next call with the same flags (sent at once, while the GPU machine is still
warm and keeps /tmp) reuses the model and continues each phase where it stopped, and the table's
"tasks done / selected (this call)" counts the folder's total. With `--total-s`, a phase still
running 20 s before the end gets SIGTERM: `amdkv gen` then stops at once and writes its summary
(2026-12-05: the model phase ran 108 s past its --max-wall on cold references of the large tasks,
and the step's kill lost its table).

What the GPU machine lacks (it has torch, triton, transformers, accelerate, tokenizers, httpx, rich,
tqdm, click): `openai` (the client), `fastapi`/`starlette`/`uvicorn`/`pydantic` (transformers
serve), `trl` (only its chat-template file, for the tiny tokenizer). Fetch them here with
`benchmarks/gen_gpu_wheels.sh wheels/` and carry `wheels/`; this script installs them with
`pip --target` into OUT/site (nothing is installed into the machine's Python).

Output in OUT: gen_gpu.json (everything: each phase's `amdkv gen` summary, the GPU memory's peak and
its largest holders), gen_gpu.md (the table for docs/gen.md), gpu_mem.csv (nvidia-smi every 5 s,
per process), server.log, and each phase's run folder (records, samples.jsonl, summary.json).
On `--device cpu` (to try the script here) phases run under the Triton interpreter.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from report_files import write_report  # noqa: E402

SERVE_WAIT_S = 120
# the trained model's folder in --state, beside the phases' run folders (named by phase: a model
# under `state/model` was the model phase's run folder, and `amdkv gen` refused it; CPU try, 2026-12-05)
STATE_MODEL_DIR = "smoke-model"
HARD_DEADLINE_RESERVE_S = 20.0  # after a phase's SIGTERM: its summary, the report, the server's stop


def log(msg: str) -> None:
    print(f"[gen_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def install_wheels(wheels: Path, site: Path) -> None:
    """The carried wheels into a private folder put on every child's PYTHONPATH."""
    site.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(wheels), "--target",
           str(site)]
    subprocess.run(pip + ["openai", "fastapi", "uvicorn"], check=True)
    trl = sorted(wheels.glob("trl-*.whl"))
    if trl:
        subprocess.run(pip + ["--no-deps", str(trl[-1])], check=True)


def child_env(site: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(REPO)] + ([str(site)] if site else []) + [env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["AMDKV_VERDICT_CACHE"] = "0"
    env.setdefault("AMDKV_CACHE_DIR", "/tmp/amdkv-cache")
    # nothing outside the GPU machine can be reached: a Hub lookup there waits for its timeout instead of
    # failing (a likely reason, not established, why `transformers serve` did not answer in 120 s on
    # 2026-12-04; its output now goes to server.log)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ---------------------------------------------------------------------------------- the model
def overfit_smoke_model(folder: Path, tasks_spec: str, task_ids: list[str], seconds: float, device: str) -> dict:
    """Train the smoke tiny model to answer each task's `write` request with its solution."""
    import torch

    from amdkv.gen.replay import fenced, reference_solution
    from amdkv.prompts import PromptConfig, build_messages
    from amdkv.tasks.suites import load_suite
    from amdkv.train.tiny_model import build_preset

    tok, model = build_preset("smoke")
    dev = "cuda" if device != "cpu" and torch.cuda.is_available() else "cpu"
    model.to(dev)
    tasks = [t for t in load_suite(tasks_spec) if not task_ids or t.id in task_ids]
    examples = []
    for t in tasks:
        code = reference_solution(t, "triton")
        if code is None:
            continue
        prompt = tok.apply_chat_template(build_messages(t, PromptConfig(language="triton", shots=0)),
                                         add_generation_prompt=True, tokenize=False)
        p = tok(prompt, add_special_tokens=False)["input_ids"]
        r = tok(fenced(code) + tok.eos_token, add_special_tokens=False)["input_ids"]
        examples.append((p, r))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    start, steps, losses, loss = time.monotonic(), 0, [], None
    batch = 4
    model.train()
    while time.monotonic() - start < seconds:
        for i in range(0, len(examples), batch):
            group = examples[i:i + batch]
            width = max(len(p) + len(r) for p, r in group)
            ids = torch.full((len(group), width), tok.pad_token_id, dtype=torch.long)
            labels = torch.full((len(group), width), -100, dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for k, (p, r) in enumerate(group):
                seq = p + r
                ids[k, :len(seq)] = torch.tensor(seq)
                labels[k, len(p):len(seq)] = torch.tensor(r)
                mask[k, :len(seq)] = 1
            with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
                loss = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), labels=labels.to(dev)).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            steps += 1
            losses.append(loss.item())
            if time.monotonic() - start >= seconds:
                break
    model.eval()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    seconds = round(time.monotonic() - start, 1)
    # This process lives on beside the server and the verifier: give the training's cached GPU memory
    # back (it held 12.5 GB through the whole call on the H100 of 2026-12-05, when references ran out)
    del model, opt, loss
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()
    return {"model": "smoke tiny Qwen3, overfit", "tasks": len(examples), "steps": steps, "seconds": seconds,
            "final_loss": round(losses[-1], 4) if losses else None, "device": dev,
            "gpu_reserved_after_mib": round(torch.cuda.memory_reserved() / 2**20) if dev == "cuda" else None}


# ---------------------------------------------------------------------------------- the server
def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: str, port: int, env: dict[str, str], device: str, log_path: Path,
                 extra_args: list[str] | None = None) -> tuple[subprocess.Popen | None, str]:
    """vLLM if it imports, else transformers serve; (process, which) or (None, reason). The server's
    output goes to `log_path`, never to a pipe nobody reads: a full pipe stops a chatty server (the
    H200 call of 2026-12-04 saw `transformers serve` not answer for 120 s with its stderr piped)."""
    vllm = subprocess.run([sys.executable, "-c", "import vllm"], env=env, capture_output=True).returncode == 0
    if vllm:
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port),
               "--host", "127.0.0.1"]
        which = "vllm"
    else:
        beside = Path(sys.executable).parent / "transformers"
        exe = str(beside) if beside.exists() else (shutil.which("transformers") or "")
        if not exe:
            return None, "no vllm and no `transformers` command"
        cmd = [exe, "serve", model, "--host", "127.0.0.1", "--port", str(port),
               "--device", "cuda" if device != "cpu" else "cpu", "--log-level", "warning",
               *kv_cache_cap(exe, extra_args or [], env)]
        which = "transformers serve"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(cmd, env=env, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    ready, why = wait_until_serving(proc, f"http://127.0.0.1:{port}", model, SERVE_WAIT_S, log_path)
    if not ready:
        proc.kill()
        return None, f"{which}: {why}"
    return proc, which


# The share of the GPU's free memory `transformers serve --continuous-batching` may take for its paged
# KV cache. Its own default is 0.9 (transformers 5.25, continuous_batching/initialization.py): the cache
# is allocated whole at the first request, and the verifier's workers on the same GPU then fail to
# create a CUDA context (`CUDA error: out of memory`). 0.15 of an H100/H200 is 12-20 GB, far more than
# the smoke model's 16 concurrent 1,536-token replies need.
KV_CACHE_SHARE = 0.15
KV_CACHE_FLAGS = ("--cb-max-memory-percent", "--cb-num-blocks")


def kv_cache_cap(exe: str, extra_args: list[str], env: dict[str, str]) -> list[str]:
    """`extra_args`, plus a cap on the continuous-batching KV cache when continuous batching is asked
    for, no cap is given, and this `transformers serve` has the flag (older versions do not)."""
    if "--continuous-batching" not in extra_args or any(a.split("=")[0] in KV_CACHE_FLAGS for a in extra_args):
        return list(extra_args)
    helptext = subprocess.run([exe, "serve", "--help"], env={**env, "COLUMNS": "400"}, capture_output=True,
                              text=True).stdout  # wide: rich would cut long option names
    if KV_CACHE_FLAGS[0] not in helptext:
        return list(extra_args)
    return [*extra_args, KV_CACHE_FLAGS[0], str(KV_CACHE_SHARE)]


def wait_until_serving(proc: subprocess.Popen, base: str, model: str, wait_s: float,
                       log_path: Path) -> tuple[bool, str]:
    """(True, "") once the server is ready, else (False, why) with its last output.

    Ready = the health route answers, then one real chat request is answered. Not `/v1/models`:
    `transformers serve` lists models by scanning the Hugging Face cache there (an error on a machine
    that never downloaded anything, or a Hub lookup in older versions), and the waiting loop took every
    such answer for "not yet" (the likely reason it "did not answer in 120 s" on 2026-12-04; with this
    check it answered in 18 s on 2026-12-05). The chat request also makes the server load the model,
    which `transformers serve` does lazily, so the first phase's clock does not include the load."""
    import httpx

    def tail() -> str:
        return log_path.read_text(errors="replace")[-800:] if log_path.is_file() else ""

    deadline = time.monotonic() + wait_s
    while True:
        if proc.poll() is not None:
            return False, f"exited (rc {proc.returncode}): {tail()}"
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:  # vLLM and transformers serve have it
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            return False, f"/health did not answer 200 within {wait_s:.0f} s; its last output: {tail()}"
        time.sleep(0.5)
    body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1, "temperature": 0}
    try:
        answer = httpx.post(base + "/v1/chat/completions", json=body, timeout=max(5.0, deadline - time.monotonic()))
    except httpx.HTTPError as exc:
        return False, f"healthy, but its first chat request failed ({exc!r}); its last output: {tail()}"
    if answer.status_code != 200:
        return False, f"healthy, but it answered {answer.status_code} to a chat request: {answer.text[:300]}"
    return True, ""


# ---------------------------------------------------------------------------------- GPU memory
class GpuMemorySampler(threading.Thread):
    """Every `every_s` seconds: the GPU's used memory and each process's (nvidia-smi), into
    gpu_mem.csv, and each process's peak with its command line. The served model phase of 2026-12-05
    (H100) ended in `CUDA error: out of memory` while starting verifier workers, and nothing said
    which process held the card: the next run says."""

    def __init__(self, path: Path, every_s: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.path, self.every_s = path, every_s
        self.phase = "start"
        self.peaks: dict[int, dict[str, Any]] = {}
        self.peak_used_mib = 0
        self._halt = threading.Event()

    def run(self) -> None:
        with open(self.path, "w") as out:
            out.write("time,phase,gpu_used_mib,gpu_total_mib,pid,process_mib\n")
            while not self._halt.is_set():
                self._sample(out)
                self._halt.wait(self.every_s)

    def _sample(self, out: Any) -> None:
        def smi(*query: str) -> list[list[str]]:
            try:
                text = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"], capture_output=True,
                                      text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                return []
            return [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.strip()]

        gpu = smi("--query-gpu=memory.used,memory.total")
        if not gpu:
            return
        used, total = (int(float(x)) for x in gpu[0][:2])
        self.peak_used_mib = max(self.peak_used_mib, used)
        stamp = time.strftime("%H:%M:%S")
        apps = smi("--query-compute-apps=pid,used_memory")
        for pid_text, mib_text in (row[:2] for row in apps if len(row) >= 2):
            try:
                pid, mib = int(pid_text), int(float(mib_text))
            except ValueError:
                continue
            out.write(f"{stamp},{self.phase},{used},{total},{pid},{mib}\n")
            if mib > self.peaks.get(pid, {}).get("mib", -1):
                self.peaks[pid] = {"mib": mib, "phase": self.phase, "cmd": _cmdline(pid), "job": _job_label(pid)}
        if not apps:
            out.write(f"{stamp},{self.phase},{used},{total},,\n")
        out.flush()

    def stop(self) -> dict[str, Any]:
        self._halt.set()
        self.join(timeout=15)
        return self.summary()

    def summary(self) -> dict[str, Any]:
        top = sorted(self.peaks.items(), key=lambda kv: -kv[1]["mib"])[:12]
        return {"peak_used_mib": self.peak_used_mib, "processes_seen": len(self.peaks),
                "top_processes": [{"pid": pid, **info} for pid, info in top]}


def _job_label(pid: int) -> str | None:
    """What a verifier worker runs ("reference l1_relu"), from the label the parent leaves in its cwd
    (pool.JOB_LABEL_FILE); None for other processes."""
    from amdkv.verify.pool import JOB_LABEL_FILE

    try:
        return Path(f"/proc/{pid}/cwd", JOB_LABEL_FILE).read_text().strip()[:200]
    except OSError:
        return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


# ---------------------------------------------------------------------------------- phases
PHASES = ("model", "replay", "replay_hip")


def parse_phases(text: str) -> dict[str, float]:
    """`model:0.6,replay:0.4` -> {"model": 0.6, "replay": 0.4} (run order kept); shares are scaled to
    sum to 1, so they are proportions of the phases' budget."""
    shares: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, _, share = part.partition(":")
        if name not in PHASES:
            raise SystemExit(f"--phases: unknown phase {name!r} (known: {', '.join(PHASES)})")
        try:
            shares[name] = float(share) if share else 1.0
        except ValueError:
            raise SystemExit(f"--phases: {part!r} is not PHASE:SHARE with a number as SHARE") from None
        if shares[name] <= 0:
            raise SystemExit(f"--phases: {name}'s share must be positive")
    if not shares:
        raise SystemExit("--phases: name at least one phase (model, replay, replay_hip)")
    total = sum(shares.values())
    return {name: share / total for name, share in shares.items()}


def gen_phase(name: str, language: str, args: list[str], out: Path, env: dict[str, str], budget: float,
              common: argparse.Namespace, hard_deadline: float | None = None) -> dict[str, Any]:
    """One `amdkv gen` phase, run in `common.state`'s folder when given (a later call resumes it) and
    copied into OUT. Past `--max-wall` the run starts nothing new and finishes what is in flight;
    at `hard_deadline` (time.monotonic(); the call's own limit less a reserve) it gets SIGTERM, stops
    at once and still writes its summary (what it recorded is kept; the next call continues)."""
    run = (Path(common.state) if common.state else out) / name
    cmd = [sys.executable, "-m", "amdkv.cli", "gen", language, "--tasks", common.tasks,
           *[a for t in common.task_ids for a in ("--task", t)], "--out", str(run), "--device", common.device,
           "--jobs", str(common.jobs), "--concurrency", str(common.concurrency), "--max-wall", str(budget),
           "--json", *args]
    log(f"phase {name}: {' '.join(cmd[3:])}")
    started = time.monotonic()
    # replies in flight at --max-wall still finish (46 s past a 126-s budget on the H200; 108 s past a
    # 212-s budget with cold references of the large tasks on the H100): generous, but never past the call
    limit = budget + max(60.0, budget)
    if hard_deadline is not None:
        limit = max(10.0, min(limit, hard_deadline - started))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stopped = None
    try:
        stdout, stderr = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stopped = f"SIGTERM after {limit:.0f} s (work in flight past --max-wall; the next call continues it)"
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            stopped += "; killed 60 s later"
    wall = time.monotonic() - started
    try:
        summary = json.loads(stdout)
    except ValueError:
        summary = {"error": stderr[-2000:]}
    if common.state:  # the phase's folder travels back with OUT (records, samples, summary)
        shutil.copytree(run, out / name, dirs_exist_ok=True)
    (out / f"{name}.stderr.txt").write_text(stderr[-20000:])
    log(f"phase {name}: rc={proc.returncode} in {wall:.0f} s" + (f" ({stopped})" if stopped else ""))
    return {"phase": name, "rc": proc.returncode, "wall_s": round(wall, 1), "stopped": stopped, "summary": summary}


def table(phases: list[dict[str, Any]], platform: str) -> str:
    head = ("| phase | model | tasks done / selected (this call) | trajectories | verifications | correct | tasks/min | "
            "completion tok/s | gen waited for verification | LLM slots idle while verifying | wall s |")
    rows = [head, "|" + "---|" * 11]
    for p in phases:
        s = p["summary"]
        if "run" not in s:
            rows.append(f"| {p['phase']} | failed: {str(s.get('error'))[:80]} |" + " |" * 9)
            continue
        thr, act, tasks, out = s["throughput"], s["activity"], s["tasks"], s["outcomes"]
        rows.append(f"| {p['phase']} | {s['run']['model'][-40:]} | {tasks['complete']} / {tasks['selected']} "
                    f"({thr['tasks_finished_now']}) | "
                    f"{s['trajectories']['recorded']} | {thr['verifications']} | {out['correct']} | "
                    f"{thr['tasks_per_min']} | {thr['completion_tokens_per_s']} | "
                    f"{act.get('gen_waited_share', 0):.1%} | {act.get('slot_idle_share', 0):.1%} | {p['wall_s']} |")
    # why a phase's numbers are partial: its own stop reason (wall_budget, interrupted, ...) and the SIGTERM
    notes = [f"- {p['phase']}: stopped early ({p['summary'].get('stopped')}"
             + (f"; {p['stopped']}" if p.get("stopped") else "") + "); a later call with --state continues it"
             for p in phases if "run" in p["summary"] and (p["summary"].get("stopped") or p.get("stopped"))]
    return (f"Platform: {platform} (verdicts say so; NVIDIA timings are not AMD numbers)\n\n" + "\n".join(rows) + "\n"
            + ("\n" + "\n".join(notes) + "\n" if notes else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--wheels", default=None, help="folder of carried wheels (gen_gpu_wheels.sh)")
    ap.add_argument("--model", default=None, help="a checkpoint folder to serve (default: overfit the smoke model)")
    ap.add_argument("--tasks", default="builtin:all")
    ap.add_argument("--task-ids", default="", help="comma-separated subset (CPU tries)")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "rocm"])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--overfit-s", type=float, default=75.0)
    ap.add_argument("--budget-s", type=float, default=330.0, help="seconds for the three gen phases together")
    ap.add_argument("--total-s", type=float, default=None,
                    help="seconds for the whole script: the phases then share what is left once the model is "
                         "trained and the server answers, less a reserve for replies in flight (overrides "
                         "--budget-s; the fixed costs before the phases took ~4 minutes on the H200)")
    ap.add_argument("--max-tokens", type=int, default=1536)
    ap.add_argument("--serve-args", default="",
                    help="extra arguments for `transformers serve` (e.g. '--continuous-batching'; without it "
                         "requests are answered one at a time: 7.8 s per 1536-token reply on the H100)")
    ap.add_argument("--model-turns", type=int, default=2,
                    help="agent turns of the model phase (1: one write per task, so every task fits a short call)")
    ap.add_argument("--phases", default="model:0.45,replay:0.35,replay_hip:0.20",
                    help="the phases to run, in this order, each with its share of the phases' budget "
                         "(PHASE:SHARE,...; phases: model, replay, replay_hip). Without `model`, no model is "
                         "trained and no server started")
    ap.add_argument("--state", default=None,
                    help="a folder that outlives the call (e.g. /tmp/amdkv-gen-state on the GPU machine, which keeps "
                         "/tmp while it stays warm between calls): the trained model and each phase's run folder live "
                         "there, so the next call with the same flags reuses the model and continues every phase "
                         "where it stopped (`amdkv gen` resumes; nothing is generated twice). Phase folders are "
                         "copied into --out")
    common = ap.parse_args()
    common.phase_shares = parse_phases(common.phases)
    common.task_ids = [t for t in common.task_ids.split(",") if t]
    out = Path(common.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    site = None
    if common.wheels:
        site = out / "site"
        install_wheels(Path(common.wheels), site)
        sys.path.insert(0, str(site))
    env = child_env(site)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "args": vars(common)}
    sampler = GpuMemorySampler(out / "gpu_mem.csv") if common.device != "cpu" and shutil.which("nvidia-smi") else None
    if sampler is not None:
        sampler.start()
    envinfo = subprocess.run([sys.executable, "-m", "amdkv.cli", "env", "--json"], env=env, capture_output=True,
                             text=True)
    try:
        report["env"] = json.loads(envinfo.stdout)
    except ValueError:
        report["env"] = {"error": envinfo.stderr[-1000:]}
    wants_model = "model" in common.phase_shares
    if not wants_model:
        model_dir, report["model"] = "", {"model": None}
    elif common.model:
        model_dir, report["model"] = common.model, {"model": common.model}
    else:
        model_dir = str(Path(common.state) / STATE_MODEL_DIR if common.state else
                        Path("/tmp") / f"amdkv-gen-smoke-{os.getpid()}")
        trained = Path(model_dir) / "amdkv_smoke_model.json"
        trained_for = {"tasks_spec": common.tasks, "task_ids": common.task_ids}
        earlier = json.loads(trained.read_text()) if trained.is_file() else {}
        if earlier.get("trained_for") == trained_for:  # a previous call of this state folder trained it
            report["model"] = {**earlier, "reused_from": model_dir}
        else:
            log(f"training the smoke model for {common.overfit_s} s")
            report["model"] = overfit_smoke_model(Path(model_dir), common.tasks, common.task_ids, common.overfit_s,
                                                  common.device)
            report["model"]["trained_for"] = trained_for
            trained.write_text(json.dumps(report["model"]))
        log(f"model: {report['model']}")
    port = free_port()
    server, which = None, "none (no model phase)"
    if wants_model:
        started = time.monotonic()
        server, which = start_server(model_dir, port, env, common.device, out / "server.log",
                                     common.serve_args.split())
        report["server_start_s"] = round(time.monotonic() - started, 1)
    report["server"] = which
    report["server_cmd"] = list(server.args) if server else None
    log(f"server: {which}")
    budget = common.budget_s
    if common.total_s:
        # each phase may overrun its --max-wall by the replies still in flight (172 s on a 126-s budget
        # on the H200): keep a fifth of what is left for that
        budget = max(30.0, 0.8 * (common.total_s - (time.monotonic() - t0)))
        log(f"phases share {budget:.0f} s of the {common.total_s:.0f} s total")
    split = common.phase_shares
    # a phase still running here gets SIGTERM: the report is written after it, inside the call
    hard_deadline = t0 + common.total_s - HARD_DEADLINE_RESERVE_S if common.total_s else None
    if common.state:
        report["state"] = {"folder": common.state, "continued": {n: (Path(common.state) / n / "summary.json").is_file()
                                                                  for n in split}}
    report["phases"] = phases = []

    def run_phase(name: str, language: str, args: list[str]) -> None:
        """One phase, then the report rewritten whole: a call cut in a later phase keeps this one's
        numbers (the H200 call of 2026-12-04 lost every phase's table to a cut in the second)."""
        if sampler is not None:
            sampler.phase = name
        phases.append(gen_phase(name, language, args, out, env, budget * split[name], common, hard_deadline))
        report["wall_s"] = round(time.monotonic() - t0, 1)
        if sampler is not None:
            report["gpu_memory"] = sampler.summary()
        write_report(out, "gen_gpu", report, render)

    sampling = ["--turns", str(common.model_turns), "--shots", "0", "--temperature", "0", "--max-tokens",
                str(common.max_tokens)]
    for name in split:
        if name == "model":
            try:
                if server is not None:
                    run_phase("model", "triton", ["--llm", "openai", "--model", model_dir, "--base-url",
                                                  f"http://127.0.0.1:{port}/v1", *sampling])
                else:
                    run_phase("model", "triton", ["--llm", "hf", "--model", model_dir, *sampling])
            finally:
                if server is not None:
                    server.kill()
        elif name == "replay":
            run_phase("replay", "triton", ["--llm", "replay", "--turns", "2", "--shots", "0"])
        else:
            run_phase("replay_hip", "hip", ["--llm", "replay", "--turns", "1", "--shots", "0"])
    if sampler is not None:
        report["gpu_memory"] = sampler.stop()
        write_report(out, "gen_gpu", report, render)
    print(render(report))
    log(f"done in {report['wall_s']} s")


def render(report: dict[str, Any]) -> str:
    phases = report["phases"]
    platform = next((p["summary"]["run"].get("platform") for p in phases if "run" in p["summary"]), None) or "?"
    return table(phases, platform)

if __name__ == "__main__":
    main()
