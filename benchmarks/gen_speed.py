"""How fast does HF `generate` decode with the learning run's model, and why was it slow?

    python3 benchmarks/gen_speed.py --out OUT [--new-tokens 256] [--batch 32] [--procs 4]

The learning run (benchmarks/learning_run.py, docs/training.md) spent 70-96 s generating one GRPO
step's 32 completions of ~750 tokens with a 22 M-parameter Qwen3 on an H200: ~100 ms per decoding
step for a model whose step is a few kernel launches. Two suspects: the per-step overhead of the
eager decoding loop (launch- and Python-bound at this size), and four training processes sharing
one GPU without MPS (their contexts are time-sliced, so tiny kernels of one wait for the others).
This script times, on the same random model (hidden 512, 6 layers, GQA 8/4, vocab 8192, bf16):

  dynamic          one process, `generate` with the default dynamic cache (what TRL does by default)
  static_compiled  one process, `cache_implementation="static"`: transformers compiles the decoding
                   forward on CUDA (CUDA graphs); the first call's compile time is reported apart
  dynamic_xN       N processes at once, each as `dynamic` (the learning run's layout)
  dynamic_fp32     as `dynamic` with float32 weights (the learning run's checkpoints are float32)
  dynamic_long     as `dynamic`, batch 48, 1500 new tokens, left-padded prompts of 120-300 tokens
                   (the learning run's held-out evaluation)
  static_long      as `dynamic_long` with a preallocated (static) cache and compilation off (TRL's
                   setting: it passes disable_compile=True): a growing cache against a fixed one
  with_verifier    as `dynamic` while this process holds an open correctness-only GPU verifier
                   (3 started spares, as the learning run's workers do)

Measured on the H200, 2026-12-02 (session 8; first three variants): dynamic 7.39 ms/step,
static_compiled 2.81 ms/step (22 s to compile), 4 processes 7.6-7.8 ms/step each. The learning run
had measured 63-81 ms per step: sharing the GPU is not the cause; the other variants look for it.

Each row: ms per decoding step (batch `--batch`, `--new-tokens` forced with min_new_tokens), tokens/s.
Writes OUT/gen_speed.json and prints a table last. NVIDIA numbers (platform cuda), never AMD ones.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def build(device: str) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
                      num_attention_heads=8, num_key_value_heads=4, head_dim=64, max_position_embeddings=4096,
                      tie_word_embeddings=True, eos_token_id=1, pad_token_id=0, bos_token_id=None)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).to(device=device, dtype=torch.bfloat16 if device != "cpu" else torch.float32)
    model.eval()
    return model


def time_generate(model: Any, batch: int, prompt_len: int, new_tokens: int, calls: int, ragged: bool = False,
                  **gen: Any) -> dict[str, Any]:
    import torch

    ids = torch.randint(2, 8192, (batch, prompt_len), device=model.device)
    mask = torch.ones_like(ids)
    if ragged:  # left padding, as a batch of real prompts of different lengths has
        lengths = torch.randint(prompt_len * 2 // 5, prompt_len + 1, (batch,), generator=torch.Generator().manual_seed(0))
        for row, n in enumerate(lengths.tolist()):
            ids[row, :prompt_len - n] = 0
            mask[row, :prompt_len - n] = 0
    seconds = []
    for _ in range(calls):
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=True, temperature=0.9, top_p=1.0, **gen)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - t0)
        assert out.shape[1] == prompt_len + new_tokens, out.shape
    last = seconds[-1]
    return {"calls_s": [round(s, 3) for s in seconds], "ms_per_step": round(1000 * last / new_tokens, 2),
            "tokens_per_s": round(batch * new_tokens / last, 1)}


def one_process(args: argparse.Namespace, variant: str, queue: Any = None) -> dict[str, Any]:
    import torch

    torch.set_num_threads(2)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = build(device)
    if variant == "dynamic_fp32":
        model.float()
    gen: dict[str, Any] = {}
    if variant in ("static_compiled", "static_long"):
        gen["cache_implementation"] = "static"
    if variant == "static_long":
        gen["disable_compile"] = True
    batch, prompt_len, new_tokens = args.batch, args.prompt_len, args.new_tokens
    if variant in ("dynamic_long", "static_long"):
        batch, prompt_len, new_tokens = 48, 300, 1500
    calls = 2  # the first call warms up (and compiles, for the static cache): the second is timed
    with contextlib.ExitStack() as stack:
        if variant == "with_verifier":
            from amdkv.train.args import VerifierArguments
            from amdkv.train.rl import open_reward_verifier

            verifier = stack.enter_context(open_reward_verifier(VerifierArguments(
                device="cuda" if device == "cuda" else "cpu", jobs=3, time_performance=False)))
            for spare in getattr(getattr(verifier, "pool", None), "_spares", []):
                spare.wait_ready()
        row = {"variant": variant, "device": device, "batch": batch, "new_tokens": new_tokens,
               **time_generate(model, batch, prompt_len, new_tokens, calls, ragged=variant.endswith("_long"), **gen)}
    if queue is not None:
        queue.put(row)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=200)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--variants", default="dynamic,dynamic_fp32,dynamic_long,static_long,with_verifier,static_compiled,dynamic_xN")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for variant in args.variants.split(","):
        t0 = time.perf_counter()
        try:
            if variant == "dynamic_xN":
                ctx = mp.get_context("spawn")
                queue = ctx.Queue()
                procs = [ctx.Process(target=one_process, args=(args, "dynamic", queue)) for _ in range(args.procs)]
                for p in procs:
                    p.start()
                per = [queue.get(timeout=300) for _ in procs]
                for p in procs:
                    p.join()
                row = {"variant": f"dynamic_x{args.procs}", "device": per[0]["device"],
                       "ms_per_step": max(r["ms_per_step"] for r in per),
                       "tokens_per_s": round(sum(r["tokens_per_s"] for r in per), 1),
                       "per_process": per}
            else:
                row = one_process(args, variant)
        except Exception as exc:  # noqa: BLE001 - one variant failing must not lose the others
            row = {"variant": variant, "error": f"{type(exc).__name__}: {exc}"[:500]}
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
        (out / "gen_speed.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    device = next((r["device"] for r in rows if "device" in r), "?")
    where = "platform cuda: NVIDIA numbers, not AMD ones" if device == "cuda" else f"device {device}"
    print(f"\nbatch {args.batch}, prompt {args.prompt_len}, {args.new_tokens} new tokens ({where})")
    print(f"{'variant':<18}{'ms/step':>10}{'tokens/s (all procs)':>24}{'wall s':>9}")
    for r in rows:
        print(f"{r['variant']:<18}{r.get('ms_per_step', 'error'):>10}{r.get('tokens_per_s', ''):>24}{r['wall_s']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
