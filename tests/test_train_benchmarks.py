"""The GPU scripts of the training stack, run at CPU size: they must work before the lead spends GPU
time on them (benchmarks/train_dryrun.py, learning_run.py, train_throughput.py; docs/training.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the training scripts need TRL (pip install 'amdkv[train]')")
pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent


def run_script(name: str, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *args], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, res.stderr[-4000:]
    return res


def test_dryrun_counts_qwen3_8b_and_asks_deepspeed(tmp_path):
    res = run_script("train_dryrun.py", "--out", str(tmp_path), "--no-gpu")
    result = json.loads((tmp_path / "dryrun.json").read_text())
    assert 8.18e9 < result["model"]["params"] < 8.20e9          # Qwen3-8B: 8.19 B with untied embeddings
    sft, rl = result["runs"]["sft"], result["runs"]["rl"]
    assert (sft["gpus"], sft["zero_stage"], rl["gpus"]) == (8, 3, 6)
    # ZeRO-3 without offload: 18 bytes per parameter over the GPUs plus the largest layer (DeepSpeed's rule)
    assert sft["deepspeed"]["zero3_gpu_gb"] == pytest.approx((18 * 8.19e9 / 8 + 4 * 622e6) / 1e9, rel=0.01)
    assert sft["per_gpu_gb"]["fits"] is None and "Qwen3-8B on the meta device" in res.stdout


def test_dryrun_completes_the_table_from_gpu_slices(tmp_path):
    """The GPU machine lacks DeepSpeed: its slices (a real H100 run, kept in docs/results) and this
    machine's DeepSpeed estimates make the table; the memory never shrinks with more layers."""
    slices = REPO / "docs/results/2026-12-05-session16-h100/dryrun_h100_slices.json"
    run_script("train_dryrun.py", "--out", str(tmp_path), "--slices-from", str(slices))
    result = json.loads((tmp_path / "dryrun.json").read_text())
    assert result["measured_on"].startswith("NVIDIA") and result["slices_from"] == str(slices)
    for name in ("sft", "rl"):
        run = result["runs"][name]
        full, two = run["extrapolated_36_layers"], run["slices"]["2_layers"]
        # the measured slope is negative (allocator noise under checkpointing); the floor is the layer input kept
        assert full["activation_gb_per_layer_measured"] < 0 < full["checkpoint_gb_per_layer"]
        assert full["activation_gb"] > two["activation_gb"]
        gb = run["per_gpu_gb"]
        assert gb["total"] == pytest.approx(gb["model_states"] + gb["activations"] + gb["vllm_reserved"])
        assert gb["fits"] is True


def test_learning_run_at_cpu_size(tmp_path):
    res = run_script("learning_run.py", "--tiny", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"))
    result = json.loads((tmp_path / "out" / "learning.json").read_text())
    (seed,) = result["seeds"]
    assert seed["error"] is None and seed["rl"]["error"] is None and seed["control"]["error"] is None
    assert seed["before_sft"] == 0.0 and seed["sft_steps"] == 1
    assert seed["before_sft_tasks"] == 1 and result["setup"]["heldout_tasks"] == 2  # v5: before SFT on a subset
    for run in ("rl", "control"):
        assert seed[run]["steps"] == 1 and [p["step"] for p in seed[run]["curve"]] == [0, 1]
        assert {"timing/generation_s", "timing/reward_s", "timing/update_s"} <= set(seed[run]["train_steps"][0])
    assert "held-out pass@1" in res.stdout and (tmp_path / "out" / "learning_logs.txt").is_file()


def test_throughput_at_cpu_size(tmp_path):
    res = run_script("train_throughput.py", "--tiny", "--out", str(tmp_path))
    result = json.loads((tmp_path / "throughput.json").read_text())
    assert set(result["sft"]) == {"plain_trl", "amdkv", "amdkv_packed"}
    assert all(r["tokens_per_s"] > 0 for r in result["sft"].values())
    steady = result["rl"]["steady"]
    assert steady["timing/reward_s"] > 0 and 0 < steady["timing/reward_frac"] < 1
    assert any(s.get("amdkv/status/ok", 0) > 0 for s in result["rl"]["steps"])  # the programs were really verified
    assert "RL step" in res.stdout
    # the SFT comparison is printed (and saved) before RL starts, so a cut RL part keeps it
    assert res.stdout.index("(SFT part)") < res.stdout.index("RL step")
