"""An eval run's numbers as Hub model-card `model-index` eval results (a second output of `amdkv eval`).

Built with huggingface_hub's own `EvalResult` / `ModelCardData`, so the YAML is exactly what the
Hub reads. One result per reported metric; for an external benchmark, its own metric under its own
rule and the amdkv value side by side (the metric `name` says which). Metrics that are not
reportable are left out (the Hub has no "not reportable"). The platform is part of every dataset
config (`cuda`, `rocm`, `cpu`): an NVIDIA number is never presented as an AMD one.

`model_index(metrics, model_name)` returns {"model_index": [...], "yaml": "...", "platform": ...}
or None when huggingface_hub is not installed (it is in the `data` and `eval` extras).
"""

from __future__ import annotations

from typing import Any, Mapping

TASK_TYPE = "text-generation"


def _results(metrics: Mapping[str, Any]) -> list[tuple[str, str, float, str]]:
    """(dataset name, metric type, value, metric name) for every reportable number."""
    out = []
    suite = str(metrics.get("suite"))
    bench = metrics.get("benchmark")
    if bench:
        for name, pair in bench["metrics"].items():
            for label, entry in pair.items():
                if entry and entry.get("value") is not None:
                    rule = bench["rule"] if label == "benchmark_rule" else label.replace("_", "-")
                    out.append((bench["display"], name, float(entry["value"]), f"{name} ({rule})"))
        return out
    for name, entry in metrics.items():
        if isinstance(entry, dict) and "aggregation" in entry and entry.get("value") is not None \
                and entry.get("reportable", True):
            out.append((suite, name, float(entry["value"]), f"{name} (amdkv)"))
    return out


def model_index(metrics: Mapping[str, Any], model_name: str) -> dict[str, Any] | None:
    try:
        from huggingface_hub import EvalResult, ModelCardData
    except ImportError:
        return None
    platform = metrics.get("platform") or "unknown"
    bench = metrics.get("benchmark") or {}
    dataset_type = f"amdkv/{bench.get('benchmark', metrics.get('suite', 'suite'))}".replace(":", "-")
    results = [EvalResult(task_type=TASK_TYPE, task_name="GPU kernel generation", dataset_type=dataset_type,
                          dataset_name=ds, dataset_config=f"platform={platform}",
                          dataset_revision=str(metrics.get("suite_version")), metric_type=mtype,
                          metric_value=value, metric_name=mname, verified=False)
               for ds, mtype, value, mname in _results(metrics)]
    if not results:
        return None
    card = ModelCardData(model_name=model_name, eval_results=results)
    data = card.to_dict()
    return {"model_index": data.get("model-index"), "yaml": card.to_yaml(), "platform": platform,
            "platform_description": metrics.get("platform_description")}
