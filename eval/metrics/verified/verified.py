"""amdkv-verified for `evaluate`: compile@k, pass@k, fast_p and speedups of GPU-kernel candidates
against any amdkv task source (your tasks, a procedural suite, a held-out split), every check of
amdkv's verifier on, with 95% intervals and the platform.

The card is README.md; the logic is amdkv's (`amdkv.evaluation.hub_metric`): this file only declares
the module, and it runs model-written kernels only after `os.environ["HF_ALLOW_CODE_EVAL"] = "1"`.
"""

import evaluate

import amdkv.evaluation.hub_metric as amdkv_metric


class Verified(amdkv_metric.BenchmarkMetric, evaluate.Metric):
    module = "verified"
