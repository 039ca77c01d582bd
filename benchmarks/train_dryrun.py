"""Dry run of the Qwen3-8B training configs: do they fit 8x MI300X before anyone rents them?

    python benchmarks/train_dryrun.py --out dryrun/            # CPU: parameters + DeepSpeed estimates
    python benchmarks/train_dryrun.py --out dryrun/            # GPU: + a 2- and 4-layer slice at real width

1. Reads training_configs/{sft,rl}_qwen3_8b.yaml and their accelerate configs (plain YAML: no TRL
   needed, so it runs on a GPU machine without it).
2. Builds Qwen3-8B on the meta device (no weights, no download: the architecture's public
   config.json numbers are below; `--model-config config.json` reads a real one) and counts its
   parameters and its largest layer.
3. DeepSpeed's own estimate of the model states (bf16 params, grads, fp32 master weights and Adam
   moments) per GPU for ZeRO-2 and ZeRO-3 without offload, on the configs' process counts
   (`estimate_zero2/3_model_states_mem_needs`; skipped where DeepSpeed is not installed).
4. On a GPU: a 2-layer and a 4-layer slice of Qwen3-8B at real width (hidden 4096, vocabulary
   151 936, bf16, sdpa, gradient checkpointing) run forward+backward on each config's micro-batch
   (SFT: 1 packed row of max_length tokens; RL: per_device_train_batch_size sequences of
   vllm_max_model_length tokens). Time and activation memory are linear in the layer count, so
   two slices give the 36-layer values: activations per GPU, and the step time of one GPU's
   micro-batch (an NVIDIA number: MI300X differs; ZeRO-3 communication is not in it).
5. Per GPU: DeepSpeed's ZeRO-3 model states + the extrapolated activations + vLLM's reservation
   (RL, colocated) against the MI300X's 192 GB. JSON under --out, a table printed last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
CONFIGS = REPO / "training_configs"
MI300X_GB = 192.0
# Qwen/Qwen3-8B config.json (public): 36 layers, hidden 4096, GQA 32/8 heads of 128, SwiGLU 12288, untied.
QWEN3_8B = {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
            "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False, "bos_token_id": 151643,
            "eos_token_id": 151645}
GB = 1e9


def read_run(train_yaml: str, accelerate_yaml: str) -> dict[str, Any]:
    cfg = yaml.safe_load((CONFIGS / train_yaml).read_text())
    acc = yaml.safe_load((CONFIGS / "accelerate" / accelerate_yaml).read_text())
    ds = json.loads((REPO / acc["deepspeed_config"]["deepspeed_config_file"]).read_text())
    rl = "num_generations" in cfg
    seq = cfg.get("vllm_max_model_length") if rl else cfg.get("max_length")
    return {"config": train_yaml, "accelerate": accelerate_yaml, "gpus": int(acc["num_processes"]),
            "zero_stage": ds["zero_optimization"]["stage"], "micro_batch": int(cfg["per_device_train_batch_size"]),
            "seq_len": int(seq), "gradient_checkpointing": bool(cfg.get("gradient_checkpointing", True)),
            "vllm_fraction": float(cfg.get("vllm_gpu_memory_utilization", 0.0)) if cfg.get("use_vllm") else 0.0}


def meta_model(config: dict[str, Any]):
    """Qwen3-8B on the meta device: shapes without memory."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(Qwen3Config(**config))
    total = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return model, total, largest


def deepspeed_estimates(total: int, largest: int, gpus: int) -> dict[str, Any] | None:
    """DeepSpeed's model-state estimates per GPU (GB), no offload, one node."""
    try:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    except ImportError as exc:
        return {"skipped": f"deepspeed not importable ({exc})"}
    z3 = estimate_zero3_model_states_mem_needs(total, largest, num_gpus_per_node=gpus, num_nodes=1,
                                               cpu_offload=False, cpu_offload_params=False, zero_init=True)
    z2 = estimate_zero2_model_states_mem_needs(total, num_gpus_per_node=gpus, num_nodes=1, cpu_offload=False)
    return {"zero3_gpu_gb": z3[1] / GB, "zero3_cpu_gb": z3[0] / GB, "zero2_gpu_gb": z2[1] / GB, "gpus": gpus}


def time_slice(config: dict[str, Any], layers: int, batch: int, seq: int, checkpointing: bool,
               repeats: int = 3) -> dict[str, float]:
    """Forward+backward of a `layers`-layer slice at real width on the GPU: median seconds and the
    peak memory above the slice's own parameters and gradients."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.cuda.empty_cache()
    cfg = Qwen3Config(**{**config, "num_hidden_layers": layers}, use_cache=False)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids = torch.randint(0, config["vocab_size"], (batch, seq), device="cuda")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    times = []
    for i in range(repeats + 1):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        torch.cuda.synchronize()
        if i:  # the first run warms kernels up
            times.append(time.perf_counter() - t0)
        peak = torch.cuda.max_memory_allocated()
        model.zero_grad(set_to_none=True)
    del model, ids, loss
    return {"seconds": statistics.median(times), "activation_gb": (peak - 2 * weights) / GB}


def checkpoint_gb_per_layer(batch: int, seq: int, hidden: int, checkpointing: bool) -> float:
    """The least a layer adds to the activation peak: with gradient checkpointing each layer keeps its
    bf16 input (batch x seq x hidden x 2 bytes) until the backward pass reaches it. Without
    checkpointing a layer keeps far more, and the measured slope is used alone."""
    return batch * seq * hidden * 2 / GB if checkpointing else 0.0


def extrapolate(a: dict[str, float], b: dict[str, float], la: int, lb: int, layers: int,
                min_gb_per_layer: float = 0.0) -> dict[str, float]:
    """Linear in the layer count from the larger slice: value(L) = value(lb) + (L - lb) * per_layer.

    Time: the measured slope. Memory: the measured slope, but never less than `min_gb_per_layer`.
    With checkpointing the peak is set by the LM head and loss (a 151 936-wide vocabulary: ~10 GB of
    fp32 logits for 16 k tokens) and by one layer's recompute, and the checkpoints of two more layers
    (0.13 GB each for SFT) are smaller than what the allocator's reuse moves the peak by: the H100 run
    of 2026-12-05 measured 27.5 GB with 2 layers and 27.0 GB with 4, a negative slope. Extrapolating
    that would promise 36 layers need less than 2; the analytic checkpoint size is the honest floor."""
    out: dict[str, float] = {}
    for key in ("seconds", "activation_gb"):
        measured = (b[key] - a[key]) / (lb - la)
        per_layer = max(measured, min_gb_per_layer) if key == "activation_gb" else measured
        out[key] = b[key] + (layers - lb) * per_layer
        out[f"{key}_per_layer"] = per_layer
        out[f"{key}_per_layer_measured"] = measured
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="dryrun_out", help="folder for dryrun.json")
    parser.add_argument("--model-config", help="a Qwen3 config.json to use instead of the built-in Qwen3-8B numbers")
    parser.add_argument("--no-gpu", action="store_true", help="skip the GPU slices even when a GPU is present")
    parser.add_argument("--slices-from", type=Path, default=None, metavar="DRYRUN_JSON",
                        help="reuse the slices a GPU machine measured (its dryrun.json) instead of measuring here: "
                             "the GPU machine lacks DeepSpeed, this one has it, so the whole table is made here")
    args = parser.parse_args(argv)
    import torch

    config = json.loads(Path(args.model_config).read_text()) if args.model_config else dict(QWEN3_8B)
    config = {k: v for k, v in config.items() if k in QWEN3_8B}
    runs = {"sft": read_run("sft_qwen3_8b.yaml", "zero3.yaml"), "rl": read_run("rl_qwen3_8b.yaml", "zero3_rl.yaml")}
    _, total, largest = meta_model(config)
    result: dict[str, Any] = {"model": {"params": total, "largest_layer_params": largest, "config": config},
                              "target_gpu": f"MI300X ({MI300X_GB:.0f} GB)", "runs": {}}
    measured = json.loads(args.slices_from.read_text()) if args.slices_from else None
    gpu = torch.cuda.is_available() and not args.no_gpu and measured is None
    if gpu:
        result["measured_on"] = torch.cuda.get_device_name(0)
    elif measured is not None:
        result["measured_on"] = measured.get("measured_on")
        result["slices_from"] = str(args.slices_from)
    for name, run in runs.items():
        entry: dict[str, Any] = {**run, "deepspeed": deepspeed_estimates(total, largest, run["gpus"])}
        slices = None
        if gpu:
            t0 = time.perf_counter()
            two = time_slice(config, 2, run["micro_batch"], run["seq_len"], run["gradient_checkpointing"])
            four = time_slice(config, 4, run["micro_batch"], run["seq_len"], run["gradient_checkpointing"])
            slices = {"2_layers": two, "4_layers": four, "wall_s": time.perf_counter() - t0}
        elif measured is not None:
            slices = measured["runs"].get(name, {}).get("slices")
        if slices:
            floor = checkpoint_gb_per_layer(run["micro_batch"], run["seq_len"], config["hidden_size"],
                                            run["gradient_checkpointing"])
            full = extrapolate(slices["2_layers"], slices["4_layers"], 2, 4, config["num_hidden_layers"], floor)
            tokens = run["micro_batch"] * run["seq_len"]
            entry["slices"] = slices
            entry["extrapolated_36_layers"] = {**full, "checkpoint_gb_per_layer": floor,
                                               "tokens_per_micro_step": tokens,
                                               "tokens_per_s_per_gpu": tokens / full["seconds"]}
        states = (entry["deepspeed"] or {}).get(f"zero{run['zero_stage']}_gpu_gb")
        acts = entry.get("extrapolated_36_layers", {}).get("activation_gb")
        vllm = run["vllm_fraction"] * MI300X_GB
        if states is not None:
            total_gb = states + (acts or 0.0) + vllm
            entry["per_gpu_gb"] = {"model_states": states, "activations": acts, "vllm_reserved": vllm,
                                   "total": total_gb, "fits": total_gb < 0.9 * MI300X_GB if acts is not None else None}
        result["runs"][name] = entry
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dryrun.json").write_text(json.dumps(result, indent=2))
    print_table(result)
    return 0


def print_table(result: dict[str, Any]) -> None:
    m = result["model"]
    print(f"\nQwen3-8B on the meta device: {m['params'] / 1e9:.3f} B parameters, largest layer "
          f"{m['largest_layer_params'] / 1e6:.0f} M; target {result['target_gpu']}; "
          f"slices measured on: {result.get('measured_on', 'no GPU (skipped)')}")
    print(f"{'run':4} {'GPUs':>4} {'ZeRO':>4} {'micro-batch':>12} {'states GB':>9} {'act. GB':>8} {'vLLM GB':>8} "
          f"{'total GB':>9} {'fits':>5} {'s/micro-step':>12} {'tok/s/GPU':>10}")
    for name, e in result["runs"].items():
        g = e.get("per_gpu_gb", {})
        x = e.get("extrapolated_36_layers", {})
        fmt = lambda v, f: "-" if v is None else format(("yes" if v else "no") if isinstance(v, bool) else v, f)  # noqa: E731
        print(f"{name:4} {e['gpus']:>4} {e['zero_stage']:>4} {str(e['micro_batch']) + 'x' + str(e['seq_len']):>12} "
              f"{fmt(g.get('model_states'), '9.1f')} {fmt(g.get('activations'), '8.1f')} "
              f"{fmt(g.get('vllm_reserved'), '8.1f')} {fmt(g.get('total'), '9.1f')} {fmt(g.get('fits'), '>5')} "
              f"{fmt(x.get('seconds'), '12.2f')} {fmt(x.get('tokens_per_s_per_gpu'), '10.0f')}")


if __name__ == "__main__":
    sys.exit(main())
