"""The loop, end to end at small scale, in one test (docs/loop.md runs the same commands):

    procedural tasks -> `amdkv gen triton` (verified on the CPU) -> record store -> `amdkv build triton`
    -> `load_dataset` -> SFT (train_sft.py's code path) -> GRPO with verifier rewards (train_rl.py's
    `main`) -> `amdkv gen --llm hf` of the trained model -> `amdkv eval` -> the `evaluate` module
    (eval/metrics/verified) loaded from this checkout

Every stage is the real one: the Triton interpreter verifies every program, the builder writes the
Hub layout that `datasets.load_dataset` reads, TRL's SFTTrainer and GRPOTrainer train a tiny Qwen3
(tests/fixtures_tiny.py) and the trained model is loaded back by the transformers client.

Two stand-ins, both because a model of 0.34 M parameters trained for seconds cannot write a Triton
kernel (it writes noise, so nothing downstream would be exercised):
- generation uses the scripted replay client (`--llm replay --script write=compile_error`): each
  task's first reply is its templated solution with a line that does not compile, the fix turn the
  solution; the verifier judges both, so the records hold two-turn trajectories ending `ok`;
- the GRPO rollouts replay those recorded replies (`RecordsRollout`, TRL's `rollout_func` hook) so
  that the verifier's rewards differ within a group and the update is not zero. GRPO with the
  model's own samples is tests/test_train_rl.py's multi-turn test.
The last generation (`--llm hf`) is the trained model's own, and `amdkv eval` scores it as it is.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from fixtures_tiny import fresh_tiny_model, tiny_tokenizer  # noqa: F401
from gen_support import cli

pytest.importorskip("trl", reason="the loop trains with TRL (pip install 'amdkv[train]')")

REPO = Path(__file__).resolve().parent.parent
SUITE = "procedural:train?n=4&seed=0"
N_TASKS = 4
pytestmark = pytest.mark.timeout(900)


def amdkv(*args: str) -> dict:
    """`amdkv ARGS --json` in this process (the real CLI; no interpreter start-up per stage)."""
    proc = cli(*args, "--json")
    assert proc.returncode == 0, f"{' '.join(proc.args)} -> {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


class RecordsRollout:
    """GRPO completions replayed from the loop's record store: for each prompt, the recorded replies
    of the trajectory of the task the prompt asks for, alternating (the broken first turn, the fix),
    so a group holds a compile error and a correct kernel (see the module docstring)."""

    def __init__(self, store_dir: Path) -> None:
        from amdkv.data.records import TRAJECTORY
        from amdkv.data.store import open_store

        self.by_source = {r["task"]["source"].strip(): [t["reply"] for t in r["trajectory"]["turns"]]
                          for r in open_store(store_dir).dicts(TRAJECTORY)}

    def __call__(self, prompts, trainer):
        tok = trainer.processing_class
        prompt_ids, completion_ids = [], []
        for i, prompt in enumerate(prompts):
            user = "\n".join(m["content"] for m in prompt if m["role"] == "user")
            replies = next(r for source, r in self.by_source.items() if source in user)
            prompt_ids.append(tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True,
                                                      return_dict=True)["input_ids"])
            completion_ids.append(tok(replies[i % len(replies)] + tok.eos_token, add_special_tokens=False)["input_ids"])
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


def _weights(model_or_dir) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_or_dir) if isinstance(model_or_dir, (str, Path)) else model_or_dir
    return {k: v.detach().clone().to(torch.float32) for k, v in model.state_dict().items()}


def _changed(before: dict, after: dict) -> bool:
    return any(not bool((before[k] == after[k]).all()) for k in before)


def test_the_loop(tmp_path, fresh_tiny_model, tiny_tokenizer):
    from datasets import load_dataset

    # 1. generation: procedural tasks, scripted replies, every program verified on the CPU
    gen = tmp_path / "gen"
    summary = amdkv("gen", "triton", "--tasks", SUITE, "--llm", "replay", "--script", "write=compile_error",
                    "--turns", "2", "--shots", "0", "--device", "cpu", "--out", gen)
    assert summary["trajectories"]["recorded"] == N_TASKS
    assert [(t["compiled"], t["ok"]) for t in summary["outcomes"]["per_turn"]] == [(0, 0), (N_TASKS, N_TASKS)]
    assert summary["run"]["platform"] == "cpu"

    # 2. records: the run folder's record store, as `amdkv records stats` reads it
    stats = amdkv("records", "stats", gen)
    assert stats["kinds"] == {"trajectory": N_TASKS} and stats["duplicates_skipped"] == 0

    # 3. build: the trajectories' correct turns become torch2triton rows, the trajectories a config
    ds = tmp_path / "ds"
    report = amdkv("build", "triton", "--records", gen, "--out", ds)
    assert report["records_by_kind"] == {"trajectory": N_TASKS}
    assert sum(report["rows"]["torch2triton"].values()) == N_TASKS
    assert sum(report["rows"]["trajectories"].values()) == N_TASKS

    # 4. load_dataset reads the folder back
    rows = load_dataset(str(ds), "torch2triton", split="train")
    trajectories = load_dataset(str(ds), "trajectories", split="train")
    assert len(rows) == N_TASKS and len(trajectories) == N_TASKS
    assert all(r["execution_verified"] is False and r["messages"][-1]["role"] == "assistant" for r in rows)
    assert all("@triton.jit" in r["messages"][-1]["content"] for r in rows)

    # 5. SFT on the built dataset (build_sft_trainer + run: what train_sft.py's main calls)
    from trl import SFTConfig

    from amdkv.train.args import AmdkvSFTArguments, parse_config
    from amdkv.train.sft import build_sft_trainer, run as run_sft

    sft_out = tmp_path / "sft"
    sft_args, model_args, amdkv_args = parse_config(SFTConfig, AmdkvSFTArguments, [
        "--config", str(REPO / "training_configs" / "sft_tiny_cpu.yaml"), "--output_dir", str(sft_out),
        "--amdkv.reference_solutions", "null", "--amdkv.dataset", str(ds), "--amdkv.dataset_config", "torch2triton",
        "--max_steps", "2"])
    initial = _weights(fresh_tiny_model)
    trainer = build_sft_trainer(sft_args, model_args, amdkv_args, model=fresh_tiny_model, tokenizer=tiny_tokenizer)
    assert len(trainer.train_dataset) == N_TASKS
    run_sft(trainer, sft_args)
    assert trainer.state.global_step == 2 and math.isfinite(trainer.state.log_history[-1]["train_loss"])
    after_sft = _weights(sft_out)
    assert _changed(initial, after_sft)

    # 6. GRPO from the SFT model with rewards from the verifier (train_rl.py's main)
    from amdkv.train.rl import main as train_rl

    rl_out = tmp_path / "rl"
    code = train_rl(["--config", str(REPO / "training_configs" / "rl_tiny_cpu.yaml"), "--output_dir", str(rl_out),
                     "--model_name_or_path", str(sft_out), "--amdkv.suite", SUITE, "--amdkv.audit.every_steps", "0",
                     "--amdkv.reward_log", "true", "--max_completion_length", "2048"],
                    rollout_func=RecordsRollout(gen))
    assert code == 0
    logged = [json.loads(line) for line in (rl_out / "amdkv_rewards.rank0.jsonl").read_text().splitlines()]
    assert len(logged) == 2  # one reward call per step
    statuses = [s for entry in logged for s in entry["statuses"]]
    rewards = [r for entry in logged for r in entry["rewards"]]
    assert sorted(set(statuses)) == ["compile_error", "ok"], statuses
    assert max(rewards) >= 1.5 and min(rewards) == pytest.approx(0.1)  # correct vs the format term alone
    assert _changed(after_sft, _weights(rl_out))

    # 7. the trained model generates (transformers client) and `amdkv eval` scores what it wrote
    gen2 = tmp_path / "gen-rl"
    summary2 = amdkv("gen", "triton", "--tasks", SUITE, "--llm", "hf", "--model", rl_out, "--turns", "1",
                     "--shots", "0", "--max-tokens", "16", "--device", "cpu", "--out", gen2)
    assert summary2["trajectories"]["recorded"] == N_TASKS and summary2["tokens"]["completion_tokens"] > 0
    metrics = amdkv("eval", SUITE, "--samples", gen2 / "samples.jsonl", "--out", tmp_path / "eval", "--device", "cpu",
                    "--trials", "1", "--bootstrap", "0")
    assert metrics["n_tasks"] == N_TASKS, metrics

    # 8. the `evaluate` module, loaded from this checkout, scores the same samples as `amdkv eval`,
    # and the replayed run's final replies (correct kernels) as correct
    import evaluate

    os.environ["HF_ALLOW_CODE_EVAL"] = "1"
    try:
        module = evaluate.load(str(REPO / "eval" / "metrics" / "verified"))

        def score(samples_file: Path, last_turn_only: bool = False) -> dict:
            rows = [json.loads(line) for line in samples_file.read_text().splitlines() if line.strip()]
            preds = [r["samples"][-1:] if last_turn_only else r["samples"] for r in rows]
            return module.compute(predictions=preds, references=[r["task_id"] for r in rows],
                                  tasks=SUITE, device="cpu", k=[1], trials=1, bootstrap=0, jobs=2)

        same = score(gen2 / "samples.jsonl")
        replayed = score(gen / "samples.jsonl", last_turn_only=True)
    finally:
        os.environ.pop("HF_ALLOW_CODE_EVAL", None)
    assert same["platform"] == metrics["platform"] == "cpu" and same["n_tasks"] == N_TASKS
    for name in ("pass@1", "compile@1"):
        assert same[name] == metrics[name]["value"], (name, same[name], metrics[name])
    assert replayed["pass@1"] == 1.0 and replayed["n_tasks"] == N_TASKS, replayed
