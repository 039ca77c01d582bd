"""Unit tests of amdkv.evaluation that need no verifier: samples parsing, the results file,
report rendering (incl. GPU platforms, faked records) and the comparison."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from amdkv.errors import BadInputError
from amdkv.evaluation.compare import compare_metrics
from amdkv.evaluation.report_html import render_html, sol_bins, speedup_bins
from amdkv.evaluation.report_md import render_markdown
from amdkv.evaluation.results import ResultsFile
from amdkv.evaluation.runner import EvalSettings, build_metrics, parse_float_list, parse_int_list
from amdkv.evaluation.samples import TaskSamples, check_k, parse_samples_file

KNOWN = ["l1_relu", "l1_softmax", "l1_layernorm"]


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.jsonl"
    p.write_text(text)
    return p


# ---------------------------------------------------------------------------------- samples
def test_samples_file_ok_with_blank_lines_and_turns(tmp_path):
    p = _write(tmp_path, json.dumps({"task_id": "l1_relu", "samples": ["a", "b"]}) + "\n\n"
               + json.dumps({"task_id": "l1_softmax", "samples": ["a", "b", "c", "d", "e"],
                             "turns": [0, 1, 2, 0, 2]}) + "\n")
    entries = parse_samples_file(p, KNOWN)
    assert [e.task_id for e in entries] == ["l1_relu", "l1_softmax"]
    assert entries[0].run_indices == (0, 1) and entries[0].n_runs == 2 and entries[0].turn_of(1) is None
    assert entries[1].line == 3
    assert entries[1].run_indices == (0, 0, 0, 1, 1) and entries[1].n_runs == 2
    assert check_k(entries, [1, 3]) == [("l1_relu", 2), ("l1_softmax", 2)]
    assert check_k(entries, [2]) == []


def test_samples_file_reports_every_problem_with_its_line(tmp_path):
    lines = [
        json.dumps({"task_id": "l1_relu", "samples": ["a"]}),
        "[1, 2]",
        json.dumps({"task_id": "l1_relu", "samples": ["b"]}),
        json.dumps({"task_id": "zzz_unknown", "samples": ["b"]}),
        json.dumps({"task_id": "l1_softmax", "samples": ["a"], "turns": [0, 1]}),
        json.dumps({"task_id": "l1_layernorm", "samples": ["a"], "extra": 1}),
        json.dumps({"task_id": 7, "samples": "abc"}),
        json.dumps({"task_id": "l1_layernorm", "samples": ["   "]}),
    ]
    with pytest.raises(BadInputError) as exc:
        parse_samples_file(_write(tmp_path, "\n".join(lines) + "\n"), KNOWN)
    msg = str(exc.value)
    assert "line 2: expected a JSON object" in msg
    assert "line 3: task 'l1_relu' already given on line 1" in msg
    assert "line 4: unknown task id 'zzz_unknown'" in msg and "the suite has 3 task(s)" in msg
    assert "line 5: `turns` has 2 entries but `samples` has 1" in msg
    assert "line 6: unknown key(s) ['extra']" in msg
    assert "line 7: `task_id` must be a non-empty string" in msg and "line 7: `samples` must be a list" in msg
    assert "line 8: sample 0 is an empty string" in msg
    assert exc.value.exit_code == 2


def test_samples_file_unreadable_empty_and_not_utf8(tmp_path):
    with pytest.raises(BadInputError, match="cannot read samples file"):
        parse_samples_file(tmp_path / "missing.jsonl", KNOWN)
    with pytest.raises(BadInputError, match="holds no task lines"):
        parse_samples_file(_write(tmp_path, "\n\n"), KNOWN)
    p = tmp_path / "latin1.jsonl"
    p.write_bytes(b'{"task_id": "l1_relu", "samples": ["\xe9"]}\n')
    with pytest.raises(BadInputError, match="not UTF-8"):
        parse_samples_file(p, KNOWN)


def test_k_and_p_lists():
    assert parse_int_list("3,1, 3") == (1, 3)
    assert parse_float_list("1.5,1") == (1.0, 1.5)
    for bad in ("0", "a", "", "-1"):
        with pytest.raises(BadInputError):
            parse_int_list(bad)
    for bad in ("x", "-0.5", "inf", "nan"):
        with pytest.raises(BadInputError):
            parse_float_list(bad)


# ---------------------------------------------------------------------------------- results
def _rec(i: int) -> dict:
    return {"task_id": "l1_relu", "sample_index": i, "verdict": {"status": "ok"}}


def test_results_file_cuts_a_partial_last_line_and_appends_cleanly(tmp_path):
    path = tmp_path / "results.jsonl"
    with ResultsFile(path) as rf:
        rf.append(_rec(0))
        rf.append(_rec(1))
    good = path.read_bytes()
    path.write_bytes(good + b'{"task_id": "l1_relu", "sam')
    rf = ResultsFile(path)
    assert set(rf.load()) == {("l1_relu", 0), ("l1_relu", 1)}
    assert rf.dropped_tail == b'{"task_id": "l1_relu", "sam' and path.read_bytes() == good
    with rf:
        rf.append(_rec(2))
    assert [json.loads(x)["sample_index"] for x in path.read_text().splitlines()] == [0, 1, 2]


def test_results_file_last_record_wins_and_complete_garbage_tail_is_cut(tmp_path):
    path = tmp_path / "results.jsonl"
    lines = [json.dumps(_rec(0)), json.dumps(dict(_rec(0), verdict={"status": "mismatch"})), "garbage"]
    path.write_text("\n".join(lines) + "\n\n")
    recs = ResultsFile(path).load()
    assert recs[("l1_relu", 0)]["verdict"]["status"] == "mismatch"
    assert path.read_text() == "\n".join(lines[:2]) + "\n"


def test_results_file_garbage_in_the_middle_is_an_error(tmp_path):
    path = tmp_path / "results.jsonl"
    text = json.dumps(_rec(0)) + "\n{oops\n" + json.dumps(_rec(1)) + "\n"
    path.write_text(text)
    with pytest.raises(BadInputError, match="line 2"):
        ResultsFile(path).load()
    assert path.read_text() == text


# ---------------------------------------------------------------------------------- reports
def _records(platform: str) -> list[dict]:
    out = []
    spec = [("l1_relu", "elementwise", 0, "ok", 2.5, 0.6), ("l1_relu", "elementwise", 1, "ok", 0.7, 0.2),
            ("l1_softmax", "softmax", 0, "mismatch", None, None),
            ("l1_softmax", "softmax", 1, "runtime_error", None, None)]
    for tid, fam, i, status, sp, sol in spec:
        out.append({"task_id": tid, "sample_index": i, "run_index": i, "turn": None,
                    "sample_path": f"samples/{tid}/{i}.py",
                    "task": {"id": tid, "level": 1, "op_family": fam, "dtypes": ["fp32"]},
                    "verdict": {"status": status, "reason": None if status == "ok" else "why",
                                "compiled": True, "correct": status == "ok", "speedup": sp, "sol": sol,
                                "platform": platform, "device": "NVIDIA H200" if platform == "cuda" else "MI300X",
                                "diagnostics": "<script>alert('x')</script> & more" * 40}})
    return out


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_gpu_reports_show_speed_and_name_the_platform(platform, tmp_path):
    samples = _write(tmp_path, "{}")
    recs = _records(platform)
    settings = EvalSettings(suite="builtin:all", samples=str(samples), out=str(tmp_path), ks=(1, 2), ps=(1.0,),
                            bootstrap=200)
    m = build_metrics(recs, settings=settings, platform=platform, suite_tasks=[], suite_version="abc",
                      entries=[TaskSamples("l1_relu", 1, ("a", "b")), TaskSamples("l1_softmax", 2, ("a", "b"))])
    assert m["fast_1.0"]["value"] == pytest.approx((0.5 + 0) / 2)
    assert m["geomean_speedup"]["value"] == pytest.approx((2.5 * 0.7) ** 0.5)
    md, html = render_markdown(m), render_html(m, recs)
    assert "interpreter-verified" not in md and "interpreter-verified" not in html
    if platform == "cuda":
        assert "NVIDIA" in md and "not AMD" in md and "not AMD" in html
        assert "— AMD GPU" not in md and "— AMD GPU" not in html and "rocm" not in md
    else:
        assert "AMD GPU MI300X" in md and "AMD GPU MI300X" in html
    assert "speedup t_ref/t_cand (2 correct samples)" in html and "sol, fraction of roofline" in html
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "fast_1.0" in md and "geomean_speedup" in md and "1.323x" in md
    assert m["failures"]["mismatch"]["why"]["example"]["diagnostic"].count("[...]") == 1  # truncated


def test_histogram_bins():
    counts, labels = speedup_bins([0.1, 0.125, 0.9, 1.0, 1.99, 8.0, 100.0])
    assert len(counts) == len(labels) == 8 and sum(counts) == 7
    assert counts[0] == 1 and counts[1] == 1 and counts[3] == 1 and counts[4] == 2 and counts[7] == 2
    counts, labels = sol_bins([0.0, 0.05, 0.95, 1.2])
    assert counts[0] == 2 and counts[9] == 1 and counts[10] == 1


# ---------------------------------------------------------------------------------- compare
def _entry(name: str, value, ci, platform="rocm", aggregation="agg"):
    return {"name": name, "value": value, "n": 10, "ci95": ci, "aggregation": aggregation,
            "platform": platform, "reportable": value is not None}


def test_compare_marks_non_overlapping_intervals_and_refuses_cross_platform_speed():
    a = {"platform": "rocm", "suite_version": "v1", "pass@1": _entry("pass@1", 0.2, [0.1, 0.3]),
         "compile@1": _entry("compile@1", 0.5, [0.3, 0.7]), "geomean_speedup": _entry("geomean_speedup", 1.2, [1, 1.4]),
         "pass@3": _entry("pass@3", None, None)}
    b = copy.deepcopy(a)
    b["pass@1"].update(value=0.6, ci95=[0.45, 0.75])
    b["compile@1"].update(value=0.6, ci95=[0.4, 0.8])
    b["pass@3"].update(value=0.7, ci95=[0.5, 0.9])
    rows = {r["metric"]: r for r in compare_metrics(a, b)["rows"]}
    assert rows["pass@1"]["significant"] and rows["pass@1"]["diff"] == pytest.approx(0.4)
    assert not rows["compile@1"]["significant"] and rows["compile@1"]["comparable"]
    assert not rows["pass@3"]["comparable"] and "not reportable in A" == rows["pass@3"]["note"]
    assert rows["geomean_speedup"]["comparable"]
    b["platform"] = "cuda"
    b["suite_version"] = "v2"
    cmp = compare_metrics(a, b)
    rows = {r["metric"]: r for r in cmp["rows"]}
    assert not rows["geomean_speedup"]["comparable"] and rows["pass@1"]["comparable"]
    assert any("platforms differ" in n for n in cmp["notes"]) and any("suite versions" in n for n in cmp["notes"])
