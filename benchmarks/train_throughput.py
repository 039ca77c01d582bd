"""Training throughput on one GPU: our SFT against a plain TRL script, and where an RL step's time goes.

    python benchmarks/train_throughput.py --out $OUT          # H200 (trl + datasets wheels: docs/training.md)
    python benchmarks/train_throughput.py --tiny --out /tmp/t # CPU: the script's own test

SFT: the same random Qwen3 (GPU: Qwen3-0.6B's body, hidden 1024 x 28 layers, with the bundled
tokenizer's ~4 k vocabulary: ~0.45 B parameters), the same rows (the `write` prompts of the bundled
train tasks with their reference solutions, system prompt and one shot included: 3-5 k tokens, like
the 8B corpus), the same batch and precision, timed three ways:
  - `plain_trl`: `SFTTrainer(model, SFTConfig(...), train_dataset=rows)`, TRL's defaults otherwise;
  - `amdkv`: `amdkv.train.sft.build_sft_trainer` with the same settings (its checks, no packing);
  - `amdkv_packed`: the same with `packing: true, packing_strategy: bfd` (what our configs use);
  all three after one untimed plain-TRL pass over the same batches (kernel selection per shape).
tokens/s = TRL's own `num_tokens` count (non-padding tokens) over the time between the logs of
step `warmup` and the last step. Goal: amdkv / plain_trl >= 1.0.

RL: our GRPO trainer on the smoke-size model, rewards from a local correctness-only verifier on the
same GPU. The model really generates `--rl-tokens` tokens per completion (min_new_tokens), then each
completion is replaced by a distinct program (a reference solution with a unique comment, every
third one broken) so that every completion costs a full verification: the worst case for the
reward's share. Per step: generation, reward, update seconds (StepTimer). Goal: reward <= 20 %.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback


class TokenClock(TrainerCallback):
    """(time, num_tokens) at every log: tokens/s over the steady part of a run."""

    def __init__(self) -> None:
        self.points: list[tuple[int, float, float]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        if logs and "num_tokens" in logs:
            self.points.append((state.global_step, time.perf_counter(), float(logs["num_tokens"])))

    def tokens_per_s(self, warmup: int) -> float:
        steady = [p for p in self.points if p[0] >= warmup]
        (_, t0, n0), (_, t1, n1) = steady[0], steady[-1]
        return (n1 - n0) / (t1 - t0)


def sft_rows(tiny: bool) -> list[dict[str, Any]]:
    from amdkv.prompts.messages import PromptConfig
    from amdkv.tasks.suites import load_suite
    from amdkv.train.data import reference_solution_examples

    tasks = load_suite("builtin:train")
    return reference_solution_examples(tasks[:4] if tiny else tasks, PromptConfig(shots=0 if tiny else 1),
                                       system_prompt=not tiny)


def sft_throughput(tok: Any, dims: dict[str, int], rows: list[dict[str, Any]], *, steps: int, batch: int,
                   warmup: int, out_dir: Path, gpu: bool) -> dict[str, Any]:
    from datasets import Dataset
    from trl import ModelConfig, SFTConfig, SFTTrainer

    from amdkv.train.args import AmdkvSFTArguments
    from amdkv.train.sft import build_sft_trainer
    from amdkv.train.tiny_model import build_model

    data = Dataset.from_list(rows)
    results = {}
    # An untimed pass first: every batch has its own sequence length, and the first process-wide use of
    # each shape pays kernel selection and allocator growth that later runs reuse. On the H100 of
    # 2026-12-05, without it, plain TRL (timed first) read 15.6 k tokens/s and amdkv (second, the same
    # losses step for step) 30.4 k: a 1.94x that was the order, not the code.
    for name in ("warmup", "plain_trl", "amdkv", "amdkv_packed"):
        model = build_model(tok, seed=0, **dims)
        args = SFTConfig(output_dir=str(out_dir / name), max_steps=steps, per_device_train_batch_size=batch,
                         learning_rate=1e-4, logging_steps=1, save_strategy="no", report_to="none", seed=0,
                         max_length=8192, bf16=gpu, use_cpu=not gpu, gradient_checkpointing=False,
                         dataloader_num_workers=0, packing=name == "amdkv_packed", packing_strategy="bfd")
        clock = TokenClock()
        if name in ("warmup", "plain_trl"):
            trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tok, callbacks=[clock])
        else:
            trainer = build_sft_trainer(args, ModelConfig(), AmdkvSFTArguments(), train_dataset=data, model=model,
                                        tokenizer=tok, callbacks=[clock])
        trainer.train()
        if name != "warmup":
            results[name] = {"tokens_per_s": clock.tokens_per_s(warmup), "steps": trainer.state.global_step,
                             "tokens": clock.points[-1][2], "rows_per_step": batch}
        del trainer, model
        _free_gpu()
    base = results["plain_trl"]["tokens_per_s"]
    for name in ("amdkv", "amdkv_packed"):
        results[name]["ratio_to_plain_trl"] = results[name]["tokens_per_s"] / base
    return results


def _free_gpu() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class DistinctPrograms:
    """rollout_func: real generation of full length, then each completion replaced by a distinct
    program for its task (so every one is verified, never answered from the verdict cache)."""

    def __init__(self, solutions: dict[str, str], rows: dict[str, dict]) -> None:
        self.solutions = solutions
        self.rows = rows
        self.n = 0

    def __call__(self, prompts: list, trainer: Any) -> dict[str, Any]:
        from amdkv.prompts.trajectory import prompt_key
        from amdkv.train.data import solution_reply

        tok = trainer.processing_class
        prompt_ids = [tok.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=True)
                      ["input_ids"] for p in prompts]
        generated, _ = trainer._generate_single_turn(prompt_ids, None, {}, 1)  # the real generation cost
        completion_ids = []
        for p in prompts:
            self.n += 1
            code = self.solutions[self.rows[prompt_key(p)]["task_id"]] + f"\n# variant {self.n}\n"
            if self.n % 3 == 0:
                code = code.replace("class ModelNew", "class ModelNew(nn.Module):\n    pass\n\n\nclass Broken", 1)
            completion_ids.append(tok(solution_reply(code) + tok.eos_token, add_special_tokens=False)["input_ids"])
        self.generated_tokens = sum(len(g) for g in generated)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


STEP_KEYS = ("step", "timing/step_s", "timing/generation_s", "timing/reward_s", "timing/update_s", "timing/reward_frac",
             "amdkv/status/ok", "amdkv/status/compile_error", "amdkv/status/mismatch")
STEADY_KEYS = ("timing/step_s", "timing/generation_s", "timing/reward_s", "timing/update_s", "timing/reward_frac")


def rl_summary(log_history: list[dict[str, Any]], *, completions: int, tokens: int, jobs: int) -> dict[str, Any]:
    """The per-step split and its steady mean (the first step also starts the verifier's workers, so
    it is left out once there is a second)."""
    per_step = [{k: h[k] for k in STEP_KEYS if k in h} for h in log_history if "timing/step_s" in h]
    steady = per_step[1:] or per_step
    return {"steps": per_step, "completions_per_step": completions, "generated_tokens_per_completion": tokens,
            "verifier_jobs": jobs,
            "steady": {k: statistics.mean(s[k] for s in steady) for k in STEADY_KEYS} if steady else {}}


class StepSaver(TrainerCallback):
    """Saves the RL split after every logged step: a run cut by the device call's limit keeps the steps it
    finished (on 2026-12-04 the cut RL part left nothing)."""

    def __init__(self, on_step: Any) -> None:
        self.on_step = on_step

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kw: Any) -> None:
        if logs and "timing/step_s" in logs:
            self.on_step(state.log_history)


def rl_split(tok: Any, dims: dict[str, int], *, steps: int, prompts_per_step: int, generations: int, tokens: int,
             jobs: int, out_dir: Path, gpu: bool, on_step: Any = None) -> dict[str, Any]:
    from trl import GRPOConfig, ModelConfig

    from amdkv.prompts.messages import PromptConfig
    from amdkv.tasks.suites import load_suite
    from amdkv.train.args import AmdkvRLArguments, VerifierArguments
    from amdkv.train.data import reference_solution, rl_prompt_rows
    from amdkv.train.rl import build_grpo_trainer, open_reward_verifier
    from amdkv.train.tiny_model import build_model

    tasks = [t for t in load_suite("builtin:train") if t.level == 1 and reference_solution(t)][:8]
    solutions = {t.id: reference_solution(t) for t in tasks}
    rows = {r["prompt_key"]: r for r in rl_prompt_rows(tasks, PromptConfig(shots=0), system_prompt=False)}
    args = GRPOConfig(output_dir=str(out_dir / "rl"), max_steps=steps,
                      per_device_train_batch_size=prompts_per_step * generations, num_generations=generations,
                      max_completion_length=tokens, generation_kwargs={"min_new_tokens": tokens},
                      learning_rate=1e-5, beta=0.0, logging_steps=1, save_strategy="no", report_to="none", seed=0,
                      bf16=gpu, use_cpu=not gpu, gradient_checkpointing=False, dataloader_num_workers=0)
    amdkv = AmdkvRLArguments(shots=0, system_prompt=False, target_platform="none")
    verifier = open_reward_verifier(VerifierArguments(device="cuda" if gpu else "cpu", jobs=jobs,
                                                      time_performance=False))
    try:
        trainer = build_grpo_trainer(args, ModelConfig(), amdkv, model=build_model(tok, seed=0, **dims), tokenizer=tok,
                                     tasks=tasks, verifier=verifier, audit_verifier=False,
                                     rollout_func=DistinctPrograms(solutions, rows))
        summarise = lambda history: rl_summary(history, completions=prompts_per_step * generations,  # noqa: E731
                                               tokens=tokens, jobs=jobs)
        if on_step is not None:
            trainer.add_callback(StepSaver(lambda history: on_step(summarise(history))))
        trainer.train()
    finally:
        verifier.close()
    return summarise(trainer.state.log_history)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--tiny", action="store_true", help="CPU-sized run (the script's own test)")
    parser.add_argument("--skip-rl", action="store_true")
    parser.add_argument("--rl-tokens", type=int, default=768, help="tokens each completion really generates")
    parser.add_argument("--jobs", type=int, default=8, help="verifications at once (RL)")
    parser.add_argument("--rl-steps", type=int, default=4, help="RL steps on the GPU (the first is a warm-up)")
    args = parser.parse_args(argv)
    import torch

    from amdkv.train.tiny_model import build_tokenizer

    gpu = torch.cuda.is_available() and not args.tiny
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp") / f"amdkv_throughput_{int(time.time())}"
    tok = build_tokenizer()
    big = {"hidden_size": 1024, "layers": 28, "heads": 16, "kv_heads": 8, "intermediate_size": 3072}
    smoke = {"hidden_size": 512, "layers": 6, "heads": 8, "kv_heads": 4, "intermediate_size": 1536}
    unit = {"hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2, "intermediate_size": 128}
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if gpu else "cpu"}
    result["sft"] = sft_throughput(tok, unit if args.tiny else big, sft_rows(args.tiny),
                                   # batch 2 on the GPU: 8 rows of 3-5 k tokens ran the H200 out of memory at
                                   # step 3 (2026-12-02; 28 layers of activations without checkpointing)
                                   steps=3 if args.tiny else 24, batch=2,
                                   warmup=1 if args.tiny else 4, out_dir=work, gpu=gpu)
    # written and printed before RL starts: on 2026-12-04 the H200 step's limit cut the RL part and took
    # the finished SFT comparison with it
    save(result, out)
    if not args.skip_rl:
        # 4 steps on the GPU (1 warm-up + 3 steady): a step of 64 completions x 768 tokens took 75-78 s
        # on the H200, so 6 steps did not fit the step's limit
        def partial(rl: dict[str, Any]) -> None:
            result["rl"] = rl
            save(result, out)

        result["rl"] = rl_split(tok, unit if args.tiny else smoke, steps=2 if args.tiny else args.rl_steps,
                                prompts_per_step=1 if args.tiny else 8, generations=2 if args.tiny else 8,
                                tokens=8 if args.tiny else args.rl_tokens, jobs=1 if args.tiny else args.jobs,
                                out_dir=work, gpu=gpu, on_step=partial)
        save(result, out)
    return 0


def save(result: dict[str, Any], out: Path) -> None:
    """throughput.json with what is measured so far, and its lines printed."""
    (out / "throughput.json").write_text(json.dumps(result, indent=1))
    print(f"\ntraining throughput on {result['device']}" + ("" if result.get("rl", {}).get("steady") else " (SFT part)"),
          flush=True)
    for name, r in result["sft"].items():
        ratio = r.get("ratio_to_plain_trl")
        print(f"  SFT {name:13} {r['tokens_per_s']:>10.0f} tokens/s" + (f"  ({ratio:.2f}x plain TRL)" if ratio else ""))
    if result.get("rl", {}).get("steady"):
        s = result["rl"]["steady"]
        print(f"  RL step {s['timing/step_s']:.2f} s ({len(result['rl']['steps'])} steps so far) = generation "
              f"{s['timing/generation_s']:.2f} + reward "
              f"{s['timing/reward_s']:.2f} + update {s['timing/update_s']:.2f}; reward share "
              f"{s['timing/reward_frac']:.0%} ({result['rl']['completions_per_step']} distinct programs per step)",
              flush=True)

if __name__ == "__main__":
    sys.exit(main())
