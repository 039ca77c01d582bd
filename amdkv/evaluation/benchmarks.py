"""Scoring an external benchmark two ways: its own metric under its own rule, next to amdkv-strict.

Every sample of an external suite (docs/benchmarks.md) is verified twice by the same engine: once
under amdkv's policy (`strict`, or `reference` for a reference-as-candidate sanity run) and once
under the `benchmark` policy, which applies only the benchmark's own rule (KernelBench's allclose at
1e-4, GEAK-eval's allclose at 1e-3 / assert_close at 1e-2, ...) with no anti-hack check. Both sets
of verdicts go through the same metric code (`amdkv.metrics`), named as the benchmark's paper names
them, so a number from amdkv is comparable with the paper's and the amdkv-strict number beside it is
harder to game. Every sample on which the two verdicts disagree is listed with the reason.

| benchmark | "call" event | "exec" event | headline |
|---|---|---|---|
| KernelBench | the candidate builds and loads (`compiled`) | correct | fast_0, fast_1, pass@1 |
| PyTorch-to-HIP | builds and loads as HIP | correct | pass@1 |
| TritonBench-G | the tests ran to the end (status ok or mismatch) | correct | call/execution accuracy@1, corr@3 |
| ROCmBench | the tests ran to the end | correct | call/execution accuracy@1 |

Light import: standard library and amdkv.metrics (numpy).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

RAN = ("ok", "mismatch")            # statuses for which the benchmark's tests ran to the end
UNJUDGED = ("unverifiable", "infra_error")


@dataclasses.dataclass(frozen=True)
class BenchmarkInfo:
    name: str                    # suite-spec prefix (task.metadata["benchmark"])
    display: str
    call_event: str              # "compiled" | "ran": what the benchmark's call accuracy counts
    headline: tuple[str, ...]    # the metrics the benchmark's paper reports, by our names
    redistributable: bool        # may amdkv publish its tasks beside the metric (licence)
    tasks_source: str            # where an `evaluate` module loaded from the Hub finds the tasks


BENCHMARKS: dict[str, BenchmarkInfo] = {b.name: b for b in (
    BenchmarkInfo("kernelbench", "KernelBench", "compiled", ("fast_0.0", "fast_1.0", "pass@1"), True,
                  "the `amdkv/kernelbench-tasks` dataset beside the metric (MIT), or tasks='kernelbench:PATH'"),
    BenchmarkInfo("pytorch2hip", "PyTorch-to-HIP", "compiled", ("pass@1",), True,
                  "amdkv's bundled suites (pytorch2hip:builtin, in the amdkv package) by default, or "
                  "tasks='pytorch2hip:PATH' for KernelBench's problems"),
    BenchmarkInfo("tritonbench-g", "TritonBench-G", "ran",
                  ("call_accuracy@1", "execution_accuracy@1", "corr@3"), True,
                  "the `amdkv/tritonbench_g-tasks` dataset beside the metric (Apache-2.0), or "
                  "tasks='tritonbench-g:PATH'"),
    BenchmarkInfo("rocmbench", "ROCmBench", "ran", ("call_accuracy@1", "execution_accuracy@1"), False,
                  "tasks='rocmbench:PATH' only: GEAK-eval's ROCm files are 'all rights reserved', so "
                  "amdkv does not republish them"),
)}


def benchmark_of(tasks: Iterable[Any]) -> BenchmarkInfo | None:
    """The benchmark the tasks come from (all of them must agree), None for amdkv's own suites."""
    names = {t.metadata.get("benchmark") for t in tasks}
    names.discard(None)
    if len(names) != 1:
        return None
    return BENCHMARKS.get(names.pop())


def rule_name(tasks: Iterable[Any]) -> str:
    rules = {(t.metadata.get("benchmark_rule") or {}).get("name") for t in tasks}
    rules.discard(None)
    return "; ".join(sorted(rules)) or "amdkv's comparison (the benchmark is amdkv's own)"


def _call(info: BenchmarkInfo, verdict: Mapping[str, Any]) -> bool:
    if info.call_event == "compiled":
        return verdict.get("compiled") is True or verdict.get("status") == "ok"
    return verdict.get("status") in RAN


def sample_results(info: BenchmarkInfo, records: Sequence[Mapping[str, Any]]) -> list[Any]:
    """SampleResults whose `compiled` is the benchmark's call event (so compile@k is its call
    accuracy) and whose `correct` is the verdict's correctness."""
    from amdkv.metrics import SampleResult
    from amdkv.metrics.records import _task_dtype

    out = []
    for r in records:
        v, t = r["verdict"], r["task"]
        out.append(SampleResult(
            task_id=r["task_id"], sample_index=r["run_index"], turn=r.get("turn"),
            compiled=_call(info, v) if v.get("status") not in UNJUDGED else None,
            correct=v.get("correct"), status=v.get("status"), speedup=v.get("speedup"), sol=v.get("sol"),
            platform=v.get("platform"), level=t.get("level"), op_family=t.get("op_family"), dtype=_task_dtype(t)))
    return out


def _named(report: dict[str, Any], info: BenchmarkInfo, ks: Sequence[int], ps: Sequence[float]) -> dict[str, Any]:
    """The benchmark's metric names over a compute_metrics report (call accuracy = compile@k of the
    call event, execution accuracy = corr@k), plus pass@k, corr@k and fast_p as they are."""
    out: dict[str, Any] = {}
    for k in ks:
        if info.call_event == "ran":
            out[f"call_accuracy@{k}"] = _rename(report[f"compile@{k}"], f"call_accuracy@{k}",
                                               "the benchmark's tests ran without an error")
            out[f"execution_accuracy@{k}"] = _rename(report[f"corr@{k}"], f"execution_accuracy@{k}",
                                                    "the outputs matched")
        else:
            out[f"compiled@{k}"] = _rename(report[f"compile@{k}"], f"compiled@{k}", "the candidate built and loaded")
        out[f"pass@{k}"] = report[f"pass@{k}"]
        out[f"corr@{k}"] = report[f"corr@{k}"]
    if info.call_event == "compiled":  # KernelBench-style problems are timed; kernel-file benchmarks are not
        for key in report:
            if key.startswith("fast_") or key in ("geomean_speedup", "geomean_speedup_all", "mean_sol"):
                out[key] = report[key]
    return out


def _rename(entry: Mapping[str, Any], name: str, event: str) -> dict[str, Any]:
    e = dict(entry)
    e["name"] = name
    e["aggregation"] = f"unbiased pass@k of '{event}': " + str(entry.get("aggregation", ""))
    return e


def score(info: BenchmarkInfo, records: Sequence[Mapping[str, Any]], *, ks: Sequence[int],
          ps: Sequence[float], bootstrap: int, seed: int) -> dict[str, Any]:
    """The benchmark's metrics over one set of verdicts (one record per sample, as in results.jsonl)."""
    from amdkv.metrics import compute_metrics

    report = compute_metrics(sample_results(info, records), ks=ks, ps=sorted(set(ps) | {0.0}),
                             bootstrap=bootstrap, seed=seed)
    return _named(report, info, ks, ps)


# Why amdkv and the benchmark's rule can disagree, by amdkv's reason code (docs/benchmarks.md).
EXPLANATIONS = {
    "torch_fallback": "amdkv refuses PyTorch computing the result outside the candidate's kernels (static rule)",
    "torch_compute_in_forward": "PyTorch computed part of the result while the candidate's code ran (op recorder)",
    "no_kernel": "no kernel in the candidate's language is defined",
    "no_kernel_launch": "no kernel of the candidate's language was launched",
    "import_not_allowed": "the candidate imports a module amdkv does not allow",
    "uses_benchmark_test": "the candidate calls into the benchmark's own test code",
    "value_mismatch": "outside amdkv's tolerance (scaled to the output and the reference's precision)",
    "nan_mismatch": "NaN/Inf where the reference has none (e.g. output memory never written: amdkv poisons "
                    "fresh allocations)",
    "output_aliases_input": "an output shares memory with an input",
    "input_mutation": "an input was modified",
    "sandbox_violation": "the candidate opened a file, socket or process the sandbox refuses",
    "reference_failed": "the benchmark's own reference fails on this platform",
    "reference_timeout": "the benchmark's own reference ran past this run's reference timeout (AMDKV_REFERENCE_TIMEOUT)",
    "bf16_on_interpreter": "bf16 cannot be judged by the Triton CPU interpreter",
}


def _explain(strict: Mapping[str, Any], bench: Mapping[str, Any]) -> str:
    for v in (strict, bench):
        if v.get("status") not in ("ok", None):
            reason = v.get("reason") or v.get("status")
            base = EXPLANATIONS.get(reason or "", reason or "")
            first = next((ln.strip() for ln in (v.get("diagnostics") or "").splitlines() if ln.strip()), "")
            return f"{base}: {first[:300]}" if first else str(base)
    return ""


def agreement(strict_records: Mapping[tuple[str, int], Mapping[str, Any]],
              bench_records: Mapping[tuple[str, int], Mapping[str, Any]], *, policy: str) -> dict[str, Any]:
    """Counts of (benchmark verdict, amdkv verdict) over the samples both judged, and every
    disagreement with its explanation."""
    counts: Counter[str] = Counter()
    rows = []
    for key in sorted(set(strict_records) & set(bench_records)):
        s, b = strict_records[key]["verdict"], bench_records[key]["verdict"]
        if s.get("status") in UNJUDGED or b.get("status") in UNJUDGED:
            counts["not_judged"] += 1
            continue
        s_ok, b_ok = s.get("status") == "ok", b.get("status") == "ok"
        counts["both_pass" if s_ok and b_ok else "both_fail" if not (s_ok or b_ok)
               else "benchmark_only" if b_ok else "amdkv_only"] += 1
        if s_ok != b_ok:
            rows.append({"task_id": key[0], "sample_index": key[1],
                         "benchmark": {"status": b.get("status"), "reason": b.get("reason")},
                         f"amdkv_{policy}": {"status": s.get("status"), "reason": s.get("reason")},
                         "why": _explain(s, b)})
    judged = sum(counts[k] for k in ("both_pass", "both_fail", "benchmark_only", "amdkv_only"))
    agree = counts["both_pass"] + counts["both_fail"]
    return {"n": judged, "both_pass": counts["both_pass"], "both_fail": counts["both_fail"],
            "benchmark_only": counts["benchmark_only"], "amdkv_only": counts["amdkv_only"],
            "not_judged": counts["not_judged"], "agreement_rate": agree / judged if judged else None,
            "disagreements": rows}


def benchmark_report(info: BenchmarkInfo, tasks: Sequence[Any], strict: Sequence[Mapping[str, Any]],
                     bench: Sequence[Mapping[str, Any]] | None, *, policy: str, ks: Sequence[int],
                     ps: Sequence[float], bootstrap: int, seed: int, note: str | None = None) -> dict[str, Any]:
    """metrics.json["benchmark"]: per metric the benchmark-rule and the amdkv value side by side."""
    ours = score(info, strict, ks=ks, ps=ps, bootstrap=bootstrap, seed=seed)
    theirs = score(info, bench, ks=ks, ps=ps, bootstrap=bootstrap, seed=seed) if bench else {}
    label = f"amdkv_{policy}"
    metrics = {name: {"benchmark_rule": theirs.get(name), label: ours[name]} for name in ours}
    key = lambda r: (r["task_id"], r["sample_index"])  # noqa: E731
    report = {
        "benchmark": info.name, "display": info.display, "rule": rule_name(tasks), "policy": policy,
        "amdkv_label": label, "headline": list(info.headline), "metrics": metrics,
        "tasks_source": info.tasks_source, "redistributable": info.redistributable,
        "licences": sorted({t.licence for t in tasks}),
    }
    if bench:
        report["agreement"] = agreement({key(r): r for r in strict}, {key(r): r for r in bench}, policy=policy)
    else:
        report["agreement"] = None
        report["note"] = note or "the benchmark's own verdicts were not computed"
    return report


def comparison_rows(report: Mapping[str, Any]) -> list[dict[str, str]]:
    """The side-by-side table every report shows: one row per metric, headline metrics first, with
    formatted values, intervals and the number of tasks; `-` where a value is not reportable."""
    from amdkv.evaluation.format import fmt_ci, fmt_value

    label = report["amdkv_label"]
    names = list(report["metrics"])
    names.sort(key=lambda n: (n not in report["headline"], report["headline"].index(n)
                              if n in report["headline"] else 0, n))
    rows = []
    for name in names:
        pair = report["metrics"][name]
        row = {"metric": name + (" (headline)" if name in report["headline"] else "")}
        for key, col in (("benchmark_rule", "benchmark"), (label, "amdkv")):
            entry = pair.get(key)
            value = None if entry is None else entry.get("value")
            row[col] = fmt_value(name, value) if value is not None else "-"
            row[f"{col}_ci"] = fmt_ci(name, entry) if value is not None else "-"
        entry = pair.get(label) or {}
        row["n"] = str(entry.get("n", "-"))
        rows.append(row)
    return rows


def agreement_line(report: Mapping[str, Any]) -> str:
    a = report.get("agreement")
    if not a:
        return str(report.get("note") or "no benchmark verdicts")
    rate = "n/a" if a["agreement_rate"] is None else f"{a['agreement_rate']:.3f}"
    return (f"{a['n']} samples judged both ways: both pass {a['both_pass']}, both fail {a['both_fail']}, "
            f"benchmark-rule only {a['benchmark_only']}, amdkv only {a['amdkv_only']} (agreement {rate}); "
            f"not judged {a['not_judged']}")
