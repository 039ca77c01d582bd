"""What the `evaluate` modules in `eval/metrics/<name>/<name>.py` do: they stay thin and call this.

    import evaluate                                   # with HF_ALLOW_CODE_EVAL=1 set
    m = evaluate.load("amdkv/rocmbench")              # or evaluate.load("eval/metrics/rocmbench")
    m.compute(predictions=[[src, ...], ...], references=[task_id, ...], device="auto", k=[1, 3],
              verifier_url=None, tasks="rocmbench:/path/to/GEAK-eval")

`compute` writes the predictions as an `amdkv eval` samples file and runs `amdkv.evaluation.run_eval`
on them (the same verification, both verdict sets and the same metric code as the CLI), then returns
the benchmark's headline metrics (under its own rule) with 95% intervals, the amdkv-strict values
beside them, the agreement, every disagreement and the platform. Nothing here runs a kernel unless
the caller opted in with `HF_ALLOW_CODE_EVAL=1`, as evaluate's `code_eval` requires.

Where the tasks come from (docs/benchmarks.md): `tasks=` (a suite spec, or a path for this
benchmark), else the benchmark's default: the bundled suites for PyTorch-to-HIP, a tasks dataset
published beside the metric for KernelBench and TritonBench-G (downloaded with
`HfApi.snapshot_download`), and nothing for ROCmBench (its files may not be republished).

Light import (standard library and amdkv's light modules): `evaluate.load` imports `amdkv` when it
checks the module's imports.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

from amdkv.errors import BadInputError
from amdkv.evaluation.benchmarks import BENCHMARKS

ALLOW_ENV = "HF_ALLOW_CODE_EVAL"
MODULES = {"kernelbench": "kernelbench", "pytorch2hip": "pytorch2hip", "tritonbench_g": "tritonbench-g",
           "rocmbench": "rocmbench"}
# The module that scores any amdkv task source under amdkv's own rule only (no benchmark rule to sit
# beside it): your own tasks, procedural suites, a held-out split. `tasks=` is a suite spec.
VERIFIED = "verified"
VERIFIED_DEFAULT_TASKS = "builtin:all"
# The tasks dataset an `evaluate` module loaded from the Hub downloads when `tasks=` is not given
# (`amdkv publish-metric DIR --repo-id amdkv/NAME --tasks SPEC` publishes it as amdkv/NAME-tasks).
DEFAULT_TASK_DATASETS = {"kernelbench": "amdkv/kernelbench-tasks", "tritonbench-g": "amdkv/tritonbench_g-tasks"}

REFUSAL = f"""
################################################################################
                                  !!!WARNING!!!
################################################################################
This metric compiles and runs untrusted model-generated code (GPU kernels). amdkv
runs each candidate in a sandboxed process of its own, but no sandbox is perfect.
Read docs/benchmarks.md, then opt in by setting the environment variable
{ALLOW_ENV}="1", in Python:

    import os
    os.environ["{ALLOW_ENV}"] = "1"
################################################################################
"""

CITATIONS = {
    "kernelbench": "KernelBench: Can LLMs Write Efficient GPU Kernels? (Ouyang et al., 2025)",
    "pytorch2hip": "amdkv: execution-verified PyTorch-to-HIP (Pass@1)",
    "tritonbench-g": "TritonBench: Benchmarking Large Language Model Capabilities for Generating Triton "
                     "Operators (Li et al., 2025); GEAK-eval (AMD, 2025)",
    "rocmbench": "GEAK-eval ROCm benchmark (AMD, 2025)",
    "amdkv": "amdkv: execution-verified GPU kernels for AMD Instinct GPUs",
}


def metric_info(module: str) -> dict[str, Any]:
    """Keyword arguments of `evaluate.MetricInfo` for one module (features built here, so the
    modules do not repeat them)."""
    import datasets

    common = {
        "inputs_description": ("predictions: list (one per task) of lists of candidate sources; references: the "
                               "task ids; device: auto|cpu|cuda|rocm; k: list of k for pass@k; verifier_url: an "
                               "`amdkv serve` URL instead of local verification; tasks: a suite spec or path."),
        "features": datasets.Features({"predictions": datasets.Sequence(datasets.Value("string")),
                                       "references": datasets.Value("string")}),
        "reference_urls": ["docs/benchmarks.md"],
    }
    if module == VERIFIED:
        return {**common, "description": (
            "amdkv-verified: compile@k, pass@k, fast_p and speedups of GPU-kernel candidates against any amdkv task "
            "source (`tasks=`: builtin:..., procedural:..., a task folder), every check of amdkv's verifier on, "
            "with 95% bootstrap intervals over tasks and the platform that ran them."),
            "citation": CITATIONS["amdkv"]}
    info = BENCHMARKS[MODULES[module]]
    return {**common, "description": (
        f"{info.display}: the benchmark's own metric ({', '.join(info.headline)}) under its own "
        f"rule, next to the amdkv-strict verdict, with 95% bootstrap intervals over tasks. "
        f"Tasks: {info.tasks_source}."), "citation": CITATIONS[info.name]}


class BenchmarkMetric:
    """What every module in eval/metrics/ is: `class X(BenchmarkMetric, evaluate.Metric): module = NAME`.
    A mixin, so this file never imports evaluate; the module file stays a declaration."""

    module: str = ""

    def _info(self) -> Any:
        import evaluate

        return evaluate.MetricInfo(**metric_info(self.module))

    def _compute(self, predictions: Sequence[Sequence[str]], references: Sequence[str], device: str = "auto",
                 k: Sequence[int] = (1, 3), verifier_url: str | None = None, tasks: Any = None,
                 **options: Any) -> dict[str, Any]:
        return compute(self.module, predictions, references, device=device, k=k, verifier_url=verifier_url,
                       tasks=tasks, **options)


def resolve_tasks(benchmark: str, tasks: str | os.PathLike[str] | None, tasks_repo: str | None = None) -> str:
    """The suite spec to load: `tasks` as given (a spec, or a path for this benchmark), else the
    benchmark's default source (module docstring)."""
    if tasks is not None:
        from amdkv.tasks.suites import SUITE_LOADERS

        text = str(tasks)
        prefix = text.partition(":")[0]
        if prefix == benchmark:
            return text
        if prefix == "builtin" and benchmark == "pytorch2hip":
            return f"pytorch2hip:{text}"
        if prefix in SUITE_LOADERS or prefix == "builtin":
            raise BadInputError(f"tasks={text!r} are not {BENCHMARKS[benchmark].display} tasks",
                                hint=f"pass tasks='{benchmark}:/path/to/checkout' (or just the path)")
        return f"{benchmark}:{text}"
    if benchmark == "pytorch2hip":
        return "pytorch2hip:builtin"
    repo = tasks_repo or DEFAULT_TASK_DATASETS.get(benchmark)
    if repo is None:
        raise BadInputError(f"{BENCHMARKS[benchmark].display} has no published tasks: "
                            f"{BENCHMARKS[benchmark].tasks_source}",
                            hint=f"pass tasks='{benchmark}:/path/to/your/checkout'")
    from huggingface_hub import HfApi

    local = HfApi().snapshot_download(repo_id=repo, repo_type="dataset")
    return f"{benchmark}:{local}"


def compute(module: str, predictions: Sequence[Sequence[str]], references: Sequence[str], *,
            device: str = "auto", k: Sequence[int] = (1, 3), p: Sequence[float] = (1.0,),
            verifier_url: str | None = None, verifier_token: str | None = None, tasks: Any = None,
            tasks_repo: str | None = None, jobs: int = 1, trials: int = 3, timeout: float | None = None,
            bootstrap: int = 1000, seed: int = 0, policy: str = "strict", out_dir: str | None = None,
            model_name: str | None = None) -> dict[str, Any]:
    if os.environ.get(ALLOW_ENV) != "1":
        raise ValueError(REFUSAL)
    if len(predictions) != len(references):
        raise BadInputError(f"{len(predictions)} predictions for {len(references)} references",
                            hint="one list of candidate sources per task id")
    spec = str(tasks or VERIFIED_DEFAULT_TASKS) if module == VERIFIED else resolve_tasks(MODULES[module], tasks, tasks_repo)
    work = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix=f"amdkv-{module}-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _compute_in(work, spec, predictions, references, keep=out_dir is not None, verified=module == VERIFIED,
                           k=k, p=p, device=device,
                           jobs=jobs, trials=trials, timeout=timeout, bootstrap=bootstrap, seed=seed,
                           verifier_url=verifier_url, verifier_token=verifier_token, policy=policy,
                           model_name=model_name)
    finally:
        if out_dir is None:  # a caller who wants the run's files passes out_dir
            shutil.rmtree(work, ignore_errors=True)


def _compute_in(work: Path, spec: str, predictions: Sequence[Sequence[str]], references: Sequence[str], *,
                keep: bool, verified: bool, k: Sequence[int], p: Sequence[float], **settings: Any) -> dict[str, Any]:
    from amdkv.evaluation.runner import EvalSettings, run_eval

    samples = work / "samples.jsonl"
    merged: dict[str, list[str]] = {}
    for ref, preds in zip(references, predictions):
        merged.setdefault(str(ref), []).extend([preds] if isinstance(preds, str) else list(preds))
    samples.write_text("".join(json.dumps({"task_id": t, "samples": s}) + "\n" for t, s in merged.items()))
    outcome = run_eval(EvalSettings(suite=spec, samples=str(samples), out=str(work / "run"), ks=tuple(k),
                                    ps=tuple(p), allow_partial=True, **settings), progress=False)
    out = str(work / "run") if keep else None
    return summarize_verified(outcome.metrics, out) if verified else summarize(outcome.metrics, out)


def _platform_fields(metrics: dict[str, Any]) -> dict[str, Any]:
    return {"platform": metrics["platform"], "platform_description": metrics["platform_description"],
            "interpreter_verified": metrics["interpreter_verified"], "is_amd": metrics["is_amd"]}


def summarize_verified(metrics: dict[str, Any], out: str | None = None) -> dict[str, Any]:
    """evaluate's result for the `verified` module: every metric of the run (`NAME`, `NAME_ci95`),
    amdkv's rule only, then the platform and the counts."""
    from amdkv.evaluation.format import metric_names

    result: dict[str, Any] = {"suite": metrics.get("suite"), "policy": (metrics.get("settings") or {}).get("policy"),
                              **_platform_fields(metrics)}
    for name in metric_names(metrics):
        result[name] = metrics[name].get("value")
        result[f"{name}_ci95"] = metrics[name].get("ci95")
    result.update({"n_tasks": metrics.get("n_tasks"), "n_samples": metrics.get("n_samples"),
                   "status_counts": metrics.get("status_counts"), "out_dir": out})
    return result


def summarize(metrics: dict[str, Any], out: str | None = None) -> dict[str, Any]:
    """evaluate's result: headline numbers at the top level (the benchmark's rule: `NAME`, its 95%
    interval `NAME_ci95`; amdkv's: `amdkv_strict/NAME`), then the details."""
    bench = metrics["benchmark"]
    label = bench["amdkv_label"]
    result: dict[str, Any] = {"benchmark": bench["display"], "rule": bench["rule"], "policy": bench["policy"],
                              **_platform_fields(metrics)}
    for name, pair in bench["metrics"].items():
        theirs, ours = pair.get("benchmark_rule") or {}, pair.get(label) or {}
        result[name] = theirs.get("value")
        result[f"{name}_ci95"] = theirs.get("ci95")
        result[f"{label}/{name}"] = ours.get("value")
        result[f"{label}/{name}_ci95"] = ours.get("ci95")
    agreement = bench.get("agreement") or {}
    result.update({"n_tasks": metrics.get("n_tasks"), "n_samples": metrics.get("n_samples"),
                   "agreement": {k: v for k, v in agreement.items() if k != "disagreements"} or None,
                   "disagreements": agreement.get("disagreements", []), "details": bench,
                   "status_counts": metrics.get("status_counts"), "out_dir": out})
    return result
