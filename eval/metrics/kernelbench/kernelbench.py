"""KernelBench for `evaluate`: fast_0 / fast_1 / pass@k of ModelNew candidates (Triton, or HIP/CUDA load_inline) on KernelBench problems.

The benchmark's own metric under its own rule, next to amdkv-strict, with 95% intervals and the
platform: see README.md (the card) and amdkv's docs/benchmarks.md. All logic lives in amdkv
(`amdkv.evaluation.hub_metric`); this file only declares the module. It runs model-written kernels
only after `os.environ["HF_ALLOW_CODE_EVAL"] = "1"`.
"""

import evaluate

import amdkv.evaluation.hub_metric as amdkv_metric


class Kernelbench(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(**amdkv_metric.metric_info("kernelbench"))

    def _compute(self, predictions, references, device="auto", k=(1, 3), verifier_url=None, tasks=None, **options):
        return amdkv_metric.compute("kernelbench", predictions, references, device=device, k=k,
                                    verifier_url=verifier_url, tasks=tasks, **options)
