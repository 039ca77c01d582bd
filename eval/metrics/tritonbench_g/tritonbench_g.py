"""TritonBench-G for `evaluate`: call accuracy, execution accuracy and Corr@k of Triton kernel code on TritonBench-G.

The benchmark's own metric under its own rule, next to amdkv-strict, with 95% intervals and the
platform: README.md (the card) and amdkv's docs/benchmarks.md. The logic is amdkv's
(`amdkv.evaluation.hub_metric`): this file only declares the module, and it runs model-written kernels
only after `os.environ["HF_ALLOW_CODE_EVAL"] = "1"`.
"""

import evaluate

import amdkv.evaluation.hub_metric as amdkv_metric


class TritonbenchG(amdkv_metric.BenchmarkMetric, evaluate.Metric):
    module = "tritonbench_g"
