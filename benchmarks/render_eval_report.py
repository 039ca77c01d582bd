"""Render metrics.json / report.md / report.html from `amdkv eval` results.jsonl files that were
produced elsewhere (e.g. on a GPU machine whose run was cut by its time limit), without verifying
anything. Several results files may be merged (the last record of a (task, sample) wins); only tasks
whose every sample has a record whose fingerprint matches the current task source are reported.

Usage: python benchmarks/render_eval_report.py --samples S.jsonl --out DIR RESULTS.jsonl [...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from amdkv.evaluation.report_html import render_html
from amdkv.evaluation.report_md import render_markdown
from amdkv.evaluation.results import fingerprint, iter_records
from amdkv.evaluation.runner import EvalSettings, build_metrics, write_json_atomic
from amdkv.evaluation.samples import parse_samples_file, sample_hash
from amdkv.tasks.suites import load_suite, suite_version


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--suite", default="builtin:all")
    ap.add_argument("--k", default="1,3")
    ap.add_argument("results", nargs="+")
    args = ap.parse_args()
    suite_tasks = load_suite(args.suite)
    by_id = {t.id: t for t in suite_tasks}
    entries = parse_samples_file(args.samples, by_id)
    records: dict[tuple[str, int], dict] = {}
    for path in args.results:
        for rec in iter_records(path):
            records[(rec["task_id"], rec["sample_index"])] = rec
    platform = next(iter(records.values()))["verdict"]["platform"]
    kept, ordered, dropped = [], [], []
    for e in entries:
        task = by_id[e.task_id]
        recs = []
        for i, src in enumerate(e.samples):
            rec = records.get((e.task_id, i))
            fp = fingerprint(sample_sha=sample_hash(src), task_source_hash=task.source_hash, platform=platform,
                             trials=3)
            if rec is None or rec.get("fingerprint") != fp:
                recs = None
                break
            recs.append(dict(rec, run_index=i, turn=None, sample_path=f"samples/{e.task_id}/{i}.py"))
        if recs is None:
            dropped.append(e.task_id)
            continue
        kept.append(e)
        ordered += recs
    settings = EvalSettings(suite=args.suite, samples=args.samples, out=args.out,
                            ks=tuple(int(k) for k in args.k.split(",")), device=platform)
    metrics = build_metrics(ordered, settings=settings, platform=platform, suite_tasks=suite_tasks,
                            suite_version=suite_version(suite_tasks), entries=kept)
    # The environment is the machine that verified, not the one rendering.
    metrics["env"] = ordered[0]["verdict"].get("env", {})
    metrics["tasks_not_verified_in_these_results"] = dropped
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "metrics.json", metrics)
    (out / "report.md").write_text(render_markdown(metrics))
    (out / "report.html").write_text(render_html(metrics, ordered))
    print(f"{len(kept)} tasks reported, {len(dropped)} without complete matching results: {dropped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
