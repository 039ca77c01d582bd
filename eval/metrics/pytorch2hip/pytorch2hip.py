"""PyTorch-to-HIP for `evaluate`: Pass@k of HIP candidates (load_inline) on PyTorch problems, the paper's Pass@1 setting.

The benchmark's own metric under its own rule, next to amdkv-strict, with 95% intervals and the
platform: see README.md (the card) and amdkv's docs/benchmarks.md. All logic lives in amdkv
(`amdkv.evaluation.hub_metric`); this file only declares the module. It runs model-written kernels
only after `os.environ["HF_ALLOW_CODE_EVAL"] = "1"`.
"""

import evaluate

import amdkv.evaluation.hub_metric as amdkv_metric


class Pytorch2hip(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(**amdkv_metric.metric_info("pytorch2hip"))

    def _compute(self, predictions, references, device="auto", k=(1, 3), verifier_url=None, tasks=None, **options):
        return amdkv_metric.compute("pytorch2hip", predictions, references, device=device, k=k,
                                    verifier_url=verifier_url, tasks=tasks, **options)
