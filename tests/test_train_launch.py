"""Training under `accelerate launch` with 2 processes on the CPU (TOOLCHAINS.md, "Training stack on
CPU"): SFT with DeepSpeed ZeRO-2, GRPO with ZeRO-3 (local verifiers, Triton interpreter), the infra
guard stopping every rank together, and a verification service (`amdkv serve`) killed in the middle
of a run: the run must end with a non-zero exit within a minute, never with rewards.

Slow (each launch starts two Python processes that import torch, transformers, TRL and DeepSpeed;
DeepSpeed builds its shared-memory op on first use, cached in TORCH_EXTENSIONS_DIR)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="training needs TRL (pip install 'amdkv[train]')")
pytest.importorskip("accelerate", reason="launching needs accelerate (pip install 'amdkv[train]')")
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "training_configs"
TWO_RANKS = "Total train batch size (w. parallel, distributed & accumulation) = "


def accelerate_bin() -> str:
    path = shutil.which("accelerate") or str(Path(sys.executable).parent / "accelerate")
    if not Path(path).exists():
        pytest.skip("the accelerate launcher is not installed")
    return path


def launch_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ACCELERATE_USE_CPU", None)  # it would silently drop DeepSpeed
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    env.setdefault("TORCH_EXTENSIONS_DIR", str(Path(env.get("AMDKV_CACHE_DIR", tmp_path)) / "torch_extensions"))
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    return env


def launch(tmp_path: Path, accel_config: str, script: str, train_config: str, *args: str,
           timeout: float = 900) -> subprocess.CompletedProcess:
    cmd = [accelerate_bin(), "launch", "--config_file", str(CONFIGS / "accelerate" / accel_config), script,
           "--config", str(CONFIGS / train_config), "--log_level", "info", *args]
    return subprocess.run(cmd, cwd=REPO, env=launch_env(tmp_path), capture_output=True, text=True, timeout=timeout)


def test_sft_with_deepspeed_zero2_on_two_processes(tmp_path):
    out = tmp_path / "sft"
    res = launch(tmp_path, "cpu_zero2.yaml", "train_sft.py", "sft_tiny_cpu.yaml", "--output_dir", str(out),
                 "--amdkv.system_prompt", "false")
    assert res.returncode == 0, res.stderr[-4000:]
    log = res.stdout + res.stderr
    assert TWO_RANKS + "4" in log             # 2 per device x 2 processes
    assert "DeepSpeed" in log and (out / "model.safetensors").is_file()


def test_grpo_with_deepspeed_zero3_on_two_processes(tmp_path):
    out = tmp_path / "rl"
    res = launch(tmp_path, "cpu_zero3.yaml", "train_rl.py", "rl_tiny_cpu.yaml", "--output_dir", str(out),
                 "--amdkv.system_prompt", "false", "--amdkv.reward_log", "true")
    assert res.returncode == 0, res.stderr[-4000:]
    assert TWO_RANKS + "8" in res.stdout + res.stderr   # 4 completions per device x 2 processes
    for rank in (0, 1):                                   # each rank scored its own completions, twice
        calls = [json.loads(x) for x in (out / f"amdkv_rewards.rank{rank}.jsonl").read_text().splitlines()]
        assert [c["step"] for c in calls] == [0, 1] and all(len(c["statuses"]) == 4 for c in calls)
    assert (out / "model.safetensors").is_file()


GUARD = textwrap.dedent("""
    import sys, time, torch.distributed as dist
    from amdkv.errors import InfrastructureError
    from amdkv.train.distributed import leave_process_group
    from amdkv.train.reward import InfraErrorGuard
    rank = int(sys.argv[1])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=rank, world_size=2)
    guard = InfraErrorGuard(max_step_rate=0.25)
    guard.update({"ok": 4})                                    # a healthy step on both ranks
    local = {"infra_error": 4} if rank == 0 else {"ok": 4}     # the verifier fails for rank 0 only
    t0 = time.monotonic()
    try:
        guard.update(local)
    except InfrastructureError as exc:
        print(f"rank {rank} stopped after {time.monotonic() - t0:.2f}s: {exc.message}", flush=True)
        leave_process_group()   # as train_rl.py does: without it gloo aborts ~1 exit in 5 (exit 134)
        sys.exit(3)
    print(f"rank {rank} went on", flush=True)
""")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_infra_guard_stops_every_rank_together(tmp_path):
    """Rank 0's verifier fails, rank 1's does not: both ranks raise the same error in the same
    reward call (an all-reduce of the counts), so neither waits forever in TRL's next gather."""
    port = str(free_port())
    env = launch_env(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-c", GUARD, str(r), port], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=120) for p in procs]
    for rank, (p, (stdout, stderr)) in enumerate(zip(procs, outs)):
        assert p.returncode == 3, stderr[-2000:]
        assert f"rank {rank} stopped" in stdout and "4 of 8 completions" in stdout


def test_killed_verification_service_ends_the_run_within_a_minute(tmp_path):
    """GRPO on 2 processes (DDP) with rewards from a real `amdkv serve` (CPU, interpreter) and planted
    replies (a correct and a wrong program per rank and step). The service is SIGKILLed after the
    first rewarded step: every rank stops with the infra error and a non-zero exit within a minute,
    and no reward was produced from a verdict that came after the kill."""
    from amdkv.serve.server import ServeProcess

    out = tmp_path / "rl"
    serve = ServeProcess("--port", "0", "--device", "cpu", "--jobs", "2", "--tasks", "builtin:all",
                         "--no-verdict-cache", log_path=tmp_path / "serve.log", env=launch_env(tmp_path)).start()
    try:
        cmd = [accelerate_bin(), "launch", "--config_file", str(CONFIGS / "accelerate" / "cpu_ddp.yaml"),
               str(REPO / "tests" / "planted_rollout.py"), "--config", str(CONFIGS / "rl_tiny_cpu.yaml"),
               "--output_dir", str(out), "--max_steps", "200", "--amdkv.system_prompt", "false",
               "--amdkv.suite", str(REPO / "amdkv" / "tasks" / "builtin" / "general" / "l1_relu.py"),
               "--amdkv.curriculum", "[{prompts: 400}]",  # the one task, 400 times
               "--amdkv.verifier.url", serve.url, "--amdkv.verifier.timeout_s", "30",
               "--amdkv.audit.every_steps", "0", "--amdkv.reward_log", "true"]
        proc = subprocess.Popen(cmd, cwd=REPO, env=launch_env(tmp_path), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        rewarded = out / "amdkv_rewards.rank0.jsonl"
        deadline = time.monotonic() + 600
        while not (rewarded.is_file() and rewarded.read_text().strip()):
            assert proc.poll() is None, proc.stdout.read()[-4000:]
            assert time.monotonic() < deadline, "no reward within 10 minutes"
            time.sleep(0.2)
        serve.kill()
        killed_at, t_kill = time.time(), time.monotonic()
        try:
            output, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            pytest.fail("the run did not end within a minute of the kill")
        took = time.monotonic() - t_kill
    finally:
        serve.stop()
    print(f"the run ended {took:.1f} s after the service was killed (rc {proc.returncode})")
    assert proc.returncode != 0
    assert took < 60
    for rank in (0, 1):
        assert f"error (rank {rank}): " in output and "the verifier failed on" in output, output[-4000:]
        calls = [json.loads(x) for x in (out / f"amdkv_rewards.rank{rank}.jsonl").read_text().splitlines()]
        assert calls and all(c["time"] < killed_at for c in calls)
        assert all(s in ("ok", "mismatch") for c in calls for s in c["statuses"])
