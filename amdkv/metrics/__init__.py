"""amdkv.metrics: pass@k, corr@k, compile@k, fast_p and speedup aggregation (DESIGN.md §5).

Pure functions over plain `SampleResult` records: no verifier, no GPU, standard library and
numpy only. docs/metrics.md gives every formula and the decisions behind them. The usual entry
point is `compute_metrics(results)`, which returns the JSON report `amdkv eval` writes.
"""

from amdkv.metrics.aggregate import BREAKDOWN_DIMENSIONS, SCHEMA_VERSION, compute_metrics, metric_set
from amdkv.metrics.bootstrap import bootstrap_mean_ci
from amdkv.metrics.correctness import compile_at_k, compile_at_k_turns, corr_at_k, corr_at_k_turns
from amdkv.metrics.errors import MetricInputError
from amdkv.metrics.grouping import Run, TaskResults, group_by_task
from amdkv.metrics.metric import Metric
from amdkv.metrics.passk import pass_at_k, pass_at_k_exact
from amdkv.metrics.records import STATUSES, UNJUDGED_STATUSES, SampleResult, from_verdict_dict
from amdkv.metrics.speedup import fast_p, geomean_speedup, geomean_speedup_all, mean_sol

__all__ = [
    "BREAKDOWN_DIMENSIONS", "SCHEMA_VERSION", "STATUSES", "UNJUDGED_STATUSES",
    "Metric", "MetricInputError", "Run", "SampleResult", "TaskResults",
    "bootstrap_mean_ci", "compile_at_k", "compile_at_k_turns", "compute_metrics",
    "corr_at_k", "corr_at_k_turns", "fast_p", "from_verdict_dict", "geomean_speedup",
    "geomean_speedup_all", "group_by_task", "mean_sol", "metric_set", "pass_at_k",
    "pass_at_k_exact",
]
