"""benchmarks/external_gpu.py on `cpu` with our fixture files: the amdkv phases run for real (Triton
interpreter); the benchmarks' own harness code is not in the fixtures (we never copy it), so those
phases must say "unavailable". The harness runner and the comparison are tested with real
subprocesses that print results the way the harness drivers do."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench_scripts import load_benchmark_script

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "external"


def _script():
    return load_benchmark_script("external_gpu")


def test_script_on_cpu_writes_tables_and_json(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out", str(out),
                           "--device", "cpu", "--jobs", "2", "--kernelbench", str(DATA / "kernelbench"),
                           "--geak-eval", str(DATA / "rocm"), "--tritonbench", str(DATA / "tritonbench"),
                           "--tbg-source", "thunlp"], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["external_gpu.json", "external_gpu.md", "harness.jsonl",
                                                      "kb_metrics.json", "kb_run0", "rocm_metrics.json", "rocm_run0",
                                                      "tbg_metrics.json", "tbg_run0"]
    report = json.loads((out / "external_gpu.json").read_text())
    kb, tbg, rocm = (report["benchmarks"][k] for k in ("kb", "tbg", "rocm"))
    assert kb["amdkv"]["policy"] == "reference" and kb["amdkv"]["status_counts"] == {"ok": 2}
    assert tbg["amdkv"]["status_counts"] == {"ok": 2} and tbg["amdkv"]["n_tasks"] == 2
    assert rocm["amdkv"]["tasks"]["test_tiny_fixture"]["status"] == "unverifiable"
    assert "fixture" in rocm["amdkv"]["tasks"]["test_tiny_fixture"]["detail"]  # the whole diagnostics, not a line
    assert "unavailable" in kb["harness"] and "unavailable" in rocm["harness"]
    assert kb["comparison"]["counts"]["not_compared"] == 2
    md = (out / "external_gpu.md").read_text()
    assert "## KernelBench level 1" in md and "## ROCmBench" in md and "candidates/min" in md
    assert "`test_tiny_fixture`: benchmark_test_fixture" in md

    # `--amdkv-from`: a later call runs only the harness side and keeps this call's amdkv verdicts
    args = ["--device", "cpu", "--only", "tbg", "--geak-eval", str(DATA / "rocm"), "--tritonbench",
            str(DATA / "tritonbench"), "--tbg-source", "thunlp", "--amdkv-from", str(out / "external_gpu.json")]
    again = subprocess.run([sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out", str(tmp_path / "again"),
                            *args], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "amdkv's side from" in again.stdout and not (tmp_path / "again" / "tbg_metrics.json").exists()
    taken = json.loads((tmp_path / "again" / "external_gpu.json").read_text())["benchmarks"]["tbg"]["amdkv"]
    assert taken["tasks"] == tbg["amdkv"]["tasks"] and taken["from_call"] == str(out / "external_gpu.json")
    assert "from an earlier call" in (tmp_path / "again" / "external_gpu.md").read_text()
    # a report of more tasks than the call's (a whole level merged, a call per quarter) gives that call's rows
    half = subprocess.run([sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out",
                           str(tmp_path / "half"), *args, "--shard", "1/2"], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert half.returncode == 0, half.stderr[-3000:]
    carried = json.loads((tmp_path / "half" / "external_gpu.json").read_text())["benchmarks"]["tbg"]["amdkv"]
    assert len(carried["tasks"]) == 1 and carried["subset_of"] == "2 tasks of 0/1" and carried["seconds"] is None
    (tid, row), = carried["tasks"].items()
    assert row == tbg["amdkv"]["tasks"][tid]
    # merged back with the whole report, the carried part adds nothing: the whole report's rows and times stand
    merged = json.loads(subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out", str(tmp_path / "merged"), "--rerender",
         str(out / "external_gpu.json"), str(tmp_path / "half" / "external_gpu.json")], capture_output=True, text=True,
        timeout=600, cwd=tmp_path, check=True) and (tmp_path / "merged" / "external_gpu.json").read_text())
    assert merged["benchmarks"]["tbg"]["amdkv"]["tasks"] == tbg["amdkv"]["tasks"]
    assert merged["benchmarks"]["tbg"]["amdkv"]["seconds"] == tbg["amdkv"]["seconds"]
    # a harness-only call going on from an earlier one's harness rows runs only the jobs it never started
    harness_rows = dict.fromkeys(tbg["amdkv"]["tasks"], {"ok": True, "exec": True})
    harness_rows[tid] = {"ok": False, "not_run": "budget"}
    first_harness = json.loads((out / "external_gpu.json").read_text())
    first_harness["benchmarks"]["tbg"]["harness"] = {"tasks": harness_rows}
    (tmp_path / "first_harness.json").write_text(json.dumps(first_harness))
    going_on = subprocess.run([sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out",
                               str(tmp_path / "going_on"), *args, "--skip-done", str(tmp_path / "first_harness.json")],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert going_on.returncode == 0, going_on.stderr[-3000:]
    assert "(harness side); 1 to run" in going_on.stdout, going_on.stdout[-2000:]
    rest = json.loads((tmp_path / "going_on" / "external_gpu.json").read_text())["benchmarks"]["tbg"]["amdkv"]
    assert list(rest["tasks"]) == [tid] and rest["subset_of"] == "2 tasks of 0/1"
    # a report without a verdict for one of the call's tasks is refused, naming it
    lacking = json.loads((out / "external_gpu.json").read_text())
    del lacking["benchmarks"]["tbg"]["amdkv"]["tasks"][tid]
    (tmp_path / "lacking.json").write_text(json.dumps(lacking))
    refused = subprocess.run([sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--out",
                              str(tmp_path / "bad"), *args[:-1], str(tmp_path / "lacking.json"), "--shard", "1/2"],
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert refused.returncode != 0 and tid in refused.stderr and "no row there" in refused.stderr, refused.stderr[-2000:]


def test_harness_runner_budget_timeout_and_comparison(tmp_path: Path) -> None:
    mod = _script()
    ok = 'print("HARNESS_RESULT " + __import__("json").dumps({"ok": True, "exec": True, "call": True}))'
    bad = 'print("HARNESS_RESULT " + __import__("json").dumps({"ok": True, "exec": False, "call": True}))'
    jobs = [{"task_id": "a", "argv": [sys.executable, "-c", ok], "env": None, "cwd": str(tmp_path)},
            {"task_id": "b", "argv": [sys.executable, "-c", bad], "env": None, "cwd": str(tmp_path)},
            {"task_id": "c", "argv": [sys.executable, "-c", "import time; time.sleep(30)"], "env": None,
             "cwd": str(tmp_path)}]
    log = io.StringIO()
    res = mod.run_harness("fake", jobs, workers=3, budget=60, per_job_timeout=2, log=log)
    assert res["tasks"]["a"]["exec"] is True and res["tasks"]["b"]["exec"] is False
    assert res["tasks"]["c"]["timeout"] == 2 and len(log.getvalue().splitlines()) == 3
    # rows are written as jobs finish: the slow job "c" is last although it was first in line
    log = io.StringIO()
    mod.run_harness("fake", [jobs[2], jobs[0]], workers=2, budget=60, per_job_timeout=2, log=log)
    assert [json.loads(line)["task_id"] for line in log.getvalue().splitlines()] == ["a", "c"]
    late = mod.run_harness("fake", jobs[:1], workers=1, budget=-1, per_job_timeout=2, log=log)
    assert late["tasks"]["a"] == {"ok": False, "not_run": "budget"} and late["ran"] == 0
    amdkv = {"tasks": {"a": {"status": "ok", "reason": None, "diagnostic": ""},
                       "b": {"status": "ok", "reason": None, "diagnostic": ""},
                       "c": {"status": "hack_detected", "reason": "torch_fallback", "diagnostic": "line 3"},
                       "d": {"status": "ok", "reason": None, "diagnostic": ""}}}
    cmp = mod.compare("tbg", amdkv, res)
    counts = cmp["counts"]
    # "c" ran into this script's per-job limit: our budget, not the harness failing it, so not compared
    assert (counts["both_pass"], counts["amdkv_only"], counts["both_fail"]) == (1, 1, 0)
    assert (counts["harness_timeout"], counts["not_compared"], counts["agreement_rate"]) == (1, 1, 0.5)
    assert [d["task_id"] for d in cmp["disagreements"]] == ["b"]


def test_known_harness_defects_are_named_in_the_disagreements() -> None:
    """A reference the harness fails for a reason of its own (what GEAK-eval printed on the H200)
    gets that reason next to amdkv's verdict; an unknown failure gets none rather than a guess."""
    mod = _script()
    harness = {"tasks": {
        "tuple_inputs": {"ok": True, "call": True, "exec": False, "detail": "",
                         "stdout": "Failed to run benchmark for input tensor. Error: 'tuple' object has no attribute 'clone'"},
        "mangled": {"ok": True, "call": False, "exec": False, "detail": "IndentationError: unexpected indent"},
        # Python 3.12's text for the perf check's NameError, and a Triton compile error on the perf
        # file's own inputs (both on the H100 of 2026-12-05)
        "unbound_e": {"ok": True, "call": True, "exec": False, "detail": "",
                      "stdout": "Failed to run benchmark for input tensor. Error: cannot access local variable 'e' "
                                "where it is not associated with a value"},
        "perf_inputs": {"ok": True, "call": True, "exec": False, "detail": "",
                        "stdout": "Failed to run benchmark for input tensor. Error: at 11:20:\ndef k(x_ptr):"},
        "unknown": {"ok": True, "call": True, "exec": False, "detail": "", "stdout": "something else"}}}
    ok = {"status": "ok", "reason": None, "diagnostic": ""}
    rows = {d["task_id"]: d for d in mod.compare("tbg", {"tasks": dict.fromkeys(harness["tasks"], ok)},
                                                  harness)["disagreements"]}
    assert "input_tensor.clone()" in rows["tuple_inputs"]["harness_why"]
    assert "process_code" in rows["mangled"]["harness_why"]
    assert "NameError" in rows["unbound_e"]["harness_why"]
    assert "perf file calls the kernel with inputs of its own" in rows["perf_inputs"]["harness_why"]
    assert rows["unknown"]["harness_why"] == "" and rows["unknown"]["why"] == ""
    # KernelBench's eval on the H100 of 2026-12-06: 95_CrossEntropyLoss, its targets cast to fp32
    kb = {"tasks": {"level1/95_CrossEntropyLoss": {
        "ok": False, "compiled": False, "correct": False,
        "detail": "NotImplementedError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Float'"}}}
    kb_rows = mod.compare("kb", {"tasks": dict.fromkeys(kb["tasks"], ok)}, kb)["disagreements"]
    assert "integer class targets" in kb_rows[0]["harness_why"]


def test_a_harness_pass_with_an_error_in_its_own_output_is_named() -> None:
    """GEAK-eval's ROCm check passed moe_gemm on the H100 while its test output held a pytest `E` line
    with an out-of-memory error: the disagreement row says so."""
    mod = _script()
    harness = {"tasks": {
        "oom": {"ok": True, "call": True, "exec": True, "detail": ">   b_indexed = b[ids]\nE       torch.OutOfMemoryError: "
                "CUDA out of memory. Tried to allocate 14.00 GiB."},
        "clean": {"ok": True, "call": True, "exec": True, "detail": "None"}}}
    failed = {"status": "unverifiable", "reason": "reference_failed", "diagnostic": "CompilationError"}
    rows = {d["task_id"]: d for d in mod.compare("rocm", {"tasks": dict.fromkeys(harness["tasks"], failed)},
                                                  harness)["disagreements"]}
    assert rows["oom"]["harness_why"] == "passed although its own test output shows torch.OutOfMemoryError"
    assert rows["clean"]["harness_why"] == ""


def test_a_call_cut_during_a_later_benchmark_keeps_the_earlier_tables(tmp_path: Path, monkeypatch) -> None:
    """The GPU call is cut by its step limit (SIGINT, then SIGKILL): the report is written after every
    benchmark, so the one that finished is on disk when the next one is interrupted."""
    import pytest

    script = _script()
    real_phase = script.amdkv_phase

    def phase(name, *args, **kwargs):
        if name == "tbg":
            raise KeyboardInterrupt  # what gpu_check.sh's timeout -s INT does to the step
        return real_phase(name, *args, **kwargs)

    monkeypatch.setattr(script, "amdkv_phase", phase)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        script.main(["--out", str(out), "--device", "cpu", "--jobs", "2", "--kernelbench", str(DATA / "kernelbench"),
                     "--geak-eval", str(DATA / "rocm"), "--tritonbench", str(DATA / "tritonbench"),
                     "--tbg-source", "thunlp", "--only", "kb,tbg"])
    report = json.loads((out / "external_gpu.json").read_text())
    assert list(report["benchmarks"]) == ["kb"] and report["benchmarks"]["kb"]["amdkv"]["status_counts"] == {"ok": 2}
    assert "## KernelBench level 1" in (out / "external_gpu.md").read_text()
    assert not list(out.glob(".*.part")), "no half-written report file left behind"


def test_a_call_cut_during_the_amdkv_phase_keeps_what_finished(tmp_path: Path, monkeypatch) -> None:
    """Session 23's first KernelBench quarter verified 17 problems, then its step limit came during the
    one-at-a-time part, and the call came back with no verdict: each part's run folder now lies under
    --out as it is written, and a cut phase reports the verdicts that finished, marked `cut`, and
    starts nothing more (exit 130). The first part is a real verification on `cpu`; the cut is a
    KeyboardInterrupt where gpu_check.sh's `timeout -s INT` delivers one."""
    import amdkv.evaluation

    script = _script()
    spec = f"kernelbench:{DATA / 'kernelbench'}?levels=1"
    sizes = sorted(t.metadata["input_bytes"] for t in script.shard_tasks(spec, (0, 1)))
    monkeypatch.setattr(script, "KB_SOLO_ABOVE_BYTES", sizes[0])  # the larger problem runs alone, second
    real_run_eval = amdkv.evaluation.run_eval
    calls = []

    def run_eval(settings, **kwargs):
        calls.append(settings.out)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run_eval(settings, **kwargs)

    monkeypatch.setattr(amdkv.evaluation, "run_eval", run_eval)
    monkeypatch.setattr(script, "kb_harness", lambda *a, **k: pytest.fail("a cut call starts no harness"))
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    rc = script.main(["--out", str(out), "--device", "cpu", "--kernelbench", str(DATA / "kernelbench"), "--only", "kb"])
    assert rc == 130 and [Path(p).name for p in calls] == ["kb_run0", "kb_run1"]
    kb = json.loads((out / "external_gpu.json").read_text())["benchmarks"]["kb"]
    assert kb["amdkv"]["cut"] is True and kb["amdkv"]["status_counts"] == {"ok": 1}
    assert len(kb["amdkv"]["tasks"]) == 1 and kb["amdkv"]["platform"] == "cpu"
    assert (out / "kb_run0" / "results.jsonl").read_text().count("\n") == 1  # came back with the call's files
    assert kb["harness"]["unavailable"].startswith("not finished")


def test_a_call_cut_during_the_harness_phase_keeps_amdkv_verdicts(tmp_path: Path, monkeypatch) -> None:
    """Both H200 calls of 2026-12-02 ended in TritonBench-G's harness phase: amdkv's verdicts, with each
    task's seconds, are written before that phase starts, and the slowest tasks are printed."""
    import contextlib

    import pytest

    script = _script()

    def harness(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(script, "kb_harness", harness)
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    with pytest.raises(KeyboardInterrupt), contextlib.redirect_stdout(printed):
        script.main(["--out", str(out), "--device", "cpu", "--jobs", "2", "--kernelbench", str(DATA / "kernelbench"),
                     "--only", "kb"])
    kb = json.loads((out / "external_gpu.json").read_text())["benchmarks"]["kb"]
    assert kb["amdkv"]["status_counts"] == {"ok": 2} and "reference_candidates" not in kb["amdkv"]
    assert kb["harness"]["unavailable"].startswith("not finished")
    assert all(row["seconds"] > 0 for row in kb["amdkv"]["tasks"].values())
    assert "slowest: " in printed.getvalue() and "(ok)" in printed.getvalue()
    assert "not finished" in (out / "external_gpu.md").read_text()


def test_rerender_rebuilds_a_cut_harness_phase_from_its_log(tmp_path: Path) -> None:
    """A call cut in a harness phase leaves amdkv's verdicts in the report ("not finished") and each
    finished harness job in harness.jsonl: `--rerender` compares the two, and says the phase was rebuilt."""
    mod = _script()
    run = tmp_path / "run"
    run.mkdir()
    ok = {"status": "ok", "reason": None, "diagnostic": "", "seconds": 1.0, "input_bytes": None}
    amdkv = {"spec": "tritonbench-g:x", "policy": "strict", "n_tasks": 3, "load_s": 0, "seconds": 9.0, "verified": 3,
             "per_minute": 20.0, "platform": "cuda", "device": "gpu", "status_counts": {"ok": 3}, "no_reference": [],
             "trials": 3, "tasks": {"a": ok, "b": ok, "c": ok}}
    report = {"created": "now", "env": {}, "budgets": {}, "args": {}, "platform": "cuda", "device": "gpu",
              "benchmarks": {"tbg": mod.benchmark_entry("tbg", amdkv, {"unavailable": "not finished: cut"})}}
    (run / "external_gpu.json").write_text(json.dumps(report))
    rows = [{"harness": "geak-tbg", "task_id": "a", "ok": True, "call": True, "exec": True},
            {"harness": "geak-tbg", "task_id": "b", "ok": True, "call": True, "exec": False,
             "stdout": "Failed to run benchmark for input tensor. Error: 'tuple' object has no attribute 'clone'"},
            {"harness": "kernelbench", "task_id": "level1/x", "ok": True, "correct": True}]
    (run / "harness.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    md = mod.rerender(run / "external_gpu.json", tmp_path / "again")
    tbg = json.loads((tmp_path / "again" / "external_gpu.json").read_text())["benchmarks"]["tbg"]
    counts = tbg["comparison"]["counts"]
    assert (counts["both_pass"], counts["amdkv_only"], counts["not_compared"]) == (1, 1, 1)
    assert "input_tensor.clone()" in tbg["comparison"]["disagreements"][0]["harness_why"]
    assert "rebuilt from harness.jsonl" in md


def test_the_harness_phase_starts_with_the_tasks_amdkv_judged() -> None:
    """A harness phase cut by its budget must cover what both sides can be compared on first; with
    --harness-judged-only (a same-run timing of both sides) it runs those and nothing else."""
    mod = _script()
    late = mod.NOT_STARTED_BEFORE_DEADLINE
    verdicts = {"a": {"status": "infra_error", "reason": late}, "b": {"status": "ok", "reason": None},
                "c": {"status": "infra_error", "reason": "harness_failure"},
                "d": {"status": "mismatch", "reason": "values"}}
    candidates = {t: f"src {t}" for t in "abcd"}
    assert list(mod.judged_first(candidates, verdicts)) == ["b", "d", "a", "c"]
    assert mod.judged_first(candidates, verdicts, judged_only=True) == {"b": "src b", "d": "src d"}


def test_shards_split_a_suite_and_rerender_merges_the_calls(tmp_path: Path) -> None:
    """A suite longer than one device call runs as `--shard 0/2` and `--shard 1/2`: every task in
    exactly one call; `--rerender A B` gives one report over both, counts and times summed; the same
    run given twice is refused (a task in two calls)."""
    mod = _script()
    assert mod.parse_shard("1/2") == (1, 2)
    for bad in ("2/2", "x", "1/0", "-1/3"):
        with pytest.raises(SystemExit, match="--shard"):
            mod.parse_shard(bad)
    ids = [f"t{i}" for i in range(5)]
    assert sorted(ids[0::2] + ids[1::2]) == ids  # the split the phase applies to its sorted tasks
    ok = {"status": "ok", "reason": None, "diagnostic": "", "seconds": 1.0, "input_bytes": None}
    bad_row = {**ok, "status": "mismatch", "reason": "values"}

    def run(folder: str, tasks: dict, shard: str, harness_rows: list[dict], seconds: float,
            harness_workers: int = 4, **carried: str) -> Path:
        amdkv = {"spec": "tritonbench-g:x", "policy": "strict", "n_tasks": len(tasks), "load_s": 1.0,
                 "seconds": seconds, "verified": len(tasks), "per_minute": 0, "platform": "cuda", "device": "gpu",
                 "status_counts": {"ok": sum(r["status"] == "ok" for r in tasks.values()),
                                   "mismatch": sum(r["status"] == "mismatch" for r in tasks.values())},
                 "no_reference": [], "trials": 3, "shard": shard, "tasks": tasks, **carried}
        harness = {"seconds": seconds, "ran": len(harness_rows), "workers": harness_workers, "per_minute": 0,
                   "tasks": {r["task_id"]: r for r in harness_rows}}
        report = {"created": "now", "env": {}, "budgets": {}, "args": {}, "platform": "cuda", "device": "gpu",
                  "benchmarks": {"tbg": mod.benchmark_entry("tbg", amdkv, harness)}}
        d = tmp_path / folder
        d.mkdir()
        (d / "external_gpu.json").write_text(json.dumps(report))
        return d / "external_gpu.json"

    a = run("a", {"t0": ok, "t2": bad_row}, "0/2", [{"task_id": "t0", "exec": True}, {"task_id": "t2", "exec": True}],
            30.0)
    b = run("b", {"t1": ok}, "1/2", [{"task_id": "t1", "exec": False}], 10.0)
    md = mod.rerender([a, b], tmp_path / "merged")
    tbg = json.loads((tmp_path / "merged" / "external_gpu.json").read_text())["benchmarks"]["tbg"]
    assert tbg["amdkv"]["n_tasks"] == 3 and tbg["amdkv"]["status_counts"] == {"ok": 2, "mismatch": 1}
    assert tbg["amdkv"]["seconds"] == 40.0 and tbg["amdkv"]["per_minute"] == 4.5 and tbg["amdkv"]["shard"] == "0/2+1/2"
    assert tbg["harness"]["ran"] == 3 and tbg["harness"]["per_minute"] == 4.5
    counts = tbg["comparison"]["counts"]
    assert (counts["both_pass"], counts["harness_only"], counts["amdkv_only"]) == (1, 1, 1)
    assert "shards 0/2+1/2" in md
    # one shard split over two calls by --task merges back to that shard (what --amdkv-from then accepts)
    c = run("c", {"t3": ok}, "1/2", [], 5.0)
    mod.rerender([b, c], tmp_path / "merged_b")
    again = json.loads((tmp_path / "merged_b" / "external_gpu.json").read_text())["benchmarks"]["tbg"]["amdkv"]
    assert again["shard"] == "1/2" and set(again["tasks"]) == {"t1", "t3"}
    # a shard's amdkv side carried by two harness-only calls (the second with `--task` for what the
    # first's budget cut) counts once, and the second call's harness rows complete the first's
    cut = run("cut", {"t1": ok}, "1/2", [{"task_id": "t1", "ok": False, "not_run": "budget"}], 10.0)
    rest = run("rest", {"t1": ok}, "1/2", [{"task_id": "t1", "exec": True}], 10.0)
    mod.rerender([a, cut, rest], tmp_path / "resumed")
    tbg = json.loads((tmp_path / "resumed" / "external_gpu.json").read_text())["benchmarks"]["tbg"]
    assert tbg["amdkv"]["n_tasks"] == 3 and tbg["amdkv"]["seconds"] == 40.0
    assert tbg["harness"]["tasks"]["t1"]["exec"] is True and tbg["comparison"]["counts"]["both_pass"] == 2
    other = run("other", {"t1": bad_row}, "1/2", [], 10.0)  # the same task, another verdict: refused
    with pytest.raises(SystemExit, match="more than one run.*--later-replaces"):
        mod.rerender([b, other], tmp_path / "twice")
    # ... unless the later run is a re-run after a fix (`--task t2`, amdkv only): its row stands, the counts
    # are the standing rows', the times every run's sum; its harness job that never ran replaces nothing
    fixed = run("fixed", {"t2": ok}, "0/2", [{"task_id": "t2", "ok": False, "not_run": "budget"}], 5.0)
    mod.rerender([a, b, fixed], tmp_path / "rerun", later_replaces=True)
    tbg = json.loads((tmp_path / "rerun" / "external_gpu.json").read_text())["benchmarks"]["tbg"]
    assert tbg["amdkv"]["status_counts"] == {"ok": 3} and tbg["amdkv"]["n_tasks"] == 3
    assert tbg["amdkv"]["seconds"] == 45.0 and tbg["harness"]["tasks"]["t2"]["exec"] is True
    assert tbg["comparison"]["counts"]["both_pass"] == 2
    # harness-only calls (`--amdkv-from`) carried the merge from before the re-run and the one after
    # (session 25's plan): beside that merge their copies add nothing, and the old row does not come back
    before = {"t0": ok, "t1": ok, "t2": bad_row}
    h1 = run("h1", before, "0/2+1/2", [{"task_id": "t0", "exec": True}, {"task_id": "t1", "exec": True}], 40.0,
             from_call="merged.json")
    h2 = run("h2", {**before, "t2": ok}, "0/2+1/2", [{"task_id": "t2", "exec": True}], 45.0, harness_workers=2,
             from_call="rerun.json")
    merge = run("merge", {**before, "t2": ok}, "0/2+1/2", [], 45.0)  # the plan's step 2: amdkv only
    mod.rerender([merge, h1, h2], tmp_path / "final", later_replaces=True)
    tbg = json.loads((tmp_path / "final" / "external_gpu.json").read_text())["benchmarks"]["tbg"]
    assert tbg["amdkv"]["status_counts"] == {"ok": 3} and tbg["amdkv"]["seconds"] == 45.0
    assert tbg["harness"]["ran"] == 3 and tbg["comparison"]["counts"]["both_pass"] == 3
    assert tbg["harness"]["workers"] == "4 or 2 (by call)"  # the calls ran their jobs 4 and 2 at once


def test_large_problems_are_verified_one_at_a_time_after_the_others(tmp_path: Path) -> None:
    """`solo_above_bytes` (KernelBench: KB_SOLO_ABOVE_BYTES): the problems with more input run with one
    job, after the others and under the same budget; the phase reports them and merges both runs'
    verdicts and counts. Real verifications of the fixture problems on `cpu`."""
    mod = _script()
    spec = f"kernelbench:{DATA / 'kernelbench'}?levels=1"
    tasks = mod.shard_tasks(spec, (0, 1))
    sizes = sorted(t.metadata["input_bytes"] for t in tasks)
    assert len(sizes) == 2 and sizes[0] < sizes[1]
    res = mod.amdkv_phase("kb", spec, tmp_path, policy="reference", device="cpu", jobs=2, budget=600,
                          timeout=None, trials=1, solo_above_bytes=sizes[0])
    largest = max(tasks, key=lambda t: t.metadata["input_bytes"]).id
    assert res["one_at_a_time"] == [largest]
    # `--task`: one task of the shard again on its own; an id the shard lacks is refused by name
    assert [t.id for t in mod.shard_tasks(spec, (0, 1), frozenset({largest}))] == [largest]
    with pytest.raises(SystemExit, match="--task level1/nope: not a task of"):
        mod.shard_tasks(spec, (0, 1), frozenset({"level1/nope"}))
    assert set(res["tasks"]) == {t.id for t in tasks} and res["status_counts"] == {"ok": 2}
    assert res["verified"] == 2 and len(res["metrics"]["parts"]) == 2
    assert sorted(p.name for p in (tmp_path / "run_kb").iterdir()) == ["run0", "run1", "samples0.jsonl",
                                                                      "samples1.jsonl"]
    # --cache-dir / --kb-solo-jobs: the references' cache elsewhere (used, then removed), the large ones 2 at once
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    seen = []
    real_from_env = __import__("amdkv.config", fromlist=["VerifierConfig"]).VerifierConfig.from_env

    def from_env(**kwargs):
        seen.append(kwargs["cache_dir"])
        return real_from_env(**kwargs)

    import amdkv.config
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(amdkv.config.VerifierConfig, "from_env", staticmethod(from_env))
        two = mod.amdkv_phase("kb2", spec, tmp_path, policy="reference", device="cpu", jobs=2, budget=600,
                              timeout=None, trials=1, solo_above_bytes=sizes[0], solo_jobs=2, cache_dir=elsewhere)
    assert two["status_counts"] == {"ok": 2} and two["solo_jobs"] == 2
    assert len(seen) == 1 and Path(seen[0]).parent == elsewhere and list(elsewhere.iterdir()) == []
    report = {"created": "now", "env": {}, "platform": "cpu", "device": "cpu",
              "benchmarks": {"kb": mod.benchmark_entry("kb", {**res, "reference_candidates": None},
                                                       {"unavailable": "not run"})}}
    assert "1 with the largest inputs one at a time" in mod.markdown(report)
    report["benchmarks"]["kb"] = mod.benchmark_entry("kb", {**two, "reference_candidates": None}, {"unavailable": "x"})
    assert "1 with the largest inputs 2 at a time" in mod.markdown(report)


HARNESS_CUT = """
import io, os, signal, subprocess, sys, threading, time
sys.path.insert(0, sys.argv[1])
from bench_scripts import load_benchmark_script
mod = load_benchmark_script("external_gpu")
job = {"task_id": "long", "argv": [sys.executable, "-c", "import time; time.sleep(120)"], "env": None, "cwd": "."}
# process-directed, as `timeout` sends it (raise_signal would target the timer's thread only)
threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
try:
    mod.run_harness("fake", [job], workers=1, budget=60, per_job_timeout=100, log=io.StringIO())
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_a_harness_phase_cut_by_sigint_leaves_no_job_running(tmp_path: Path) -> None:
    """The step's limit sends SIGINT: the harness jobs, in sessions of their own, must not outlive it
    (session 20: a cut call may have left ROCmBench's tests running beside the next call). Real
    processes; the job's pid is found by its command line."""
    marker = "time.sleep(120)"
    proc = subprocess.run([sys.executable, "-c", HARNESS_CUT, str(REPO / "tests")], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert "interrupted" in proc.stdout, proc.stderr[-2000:]
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left, f"harness job(s) {left} outlived the interrupted phase"


def test_skip_done_runs_only_what_an_earlier_report_did_not_judge(tmp_path: Path) -> None:
    """`--skip-done REPORT`: a shard cut short goes on where it stopped. A task judged there is left out;
    one that never started, or was the machine's `infra_error`, runs again; nothing left is an error."""
    mod = _script()
    spec = f"kernelbench:{DATA / 'kernelbench'}?levels=1"
    ids = sorted(t.id for t in mod.shard_tasks(spec, (0, 1)))
    assert len(ids) == 2

    def report(rows: dict) -> Path:
        path = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"benchmarks": {"kb": {"amdkv": {"tasks": rows}}}}))
        return path

    ok = {"status": "ok", "reason": None}
    assert mod.not_done(None, "kb", spec, (0, 1), frozenset()) == frozenset()  # no report: the whole shard
    assert mod.not_done(report({ids[0]: ok}), "kb", spec, (0, 1), frozenset()) == {ids[1]}
    late = {"status": "infra_error", "reason": mod.NOT_STARTED_BEFORE_DEADLINE}
    assert mod.not_done(report({ids[0]: ok, ids[1]: late}), "kb", spec, (0, 1), frozenset()) == {ids[1]}
    with pytest.raises(SystemExit, match="every task"):
        mod.not_done(report({ids[0]: ok, ids[1]: {"status": "mismatch", "reason": "values"}}), "kb", spec, (0, 1),
                     frozenset())
    # several reports (a merge and the call after it): a task judged in any of them is done
    assert mod.not_done([report({ids[0]: ok}), report({ids[1]: late})], "kb", spec, (0, 1), frozenset()) == {ids[1]}
    with pytest.raises(SystemExit, match="every task"):
        mod.not_done([report({ids[0]: ok, ids[1]: late}), report({ids[1]: ok})], "kb", spec, (0, 1), frozenset())
    # a harness-only call (--amdkv-from) goes on from the harness's rows: a job never started runs again, one
    # past the per-job limit ran (and would run the same again)
    harness = tmp_path / "harness.json"
    harness.write_text(json.dumps({"benchmarks": {"kb": {"amdkv": {"tasks": {i: ok for i in ids}}, "harness": {
        "tasks": {ids[0]: {"ok": True, "timeout": 180}, ids[1]: {"ok": False, "not_run": "budget"}}}}}}))
    assert mod.not_done(harness, "kb", spec, (0, 1), frozenset(), side="harness") == {ids[1]}
    with pytest.raises(SystemExit, match="every task"):
        mod.not_done(harness, "kb", spec, (0, 1), frozenset())  # amdkv's side: both judged
    # --rerun: a judged task again after a fix (session 25's 45_Average_Pooling_2D), beside what is left
    both = report({ids[0]: ok, ids[1]: {"status": "runtime_error", "reason": "oom"}})
    assert mod.not_done(both, "kb", spec, (0, 1), frozenset(), rerun=frozenset({ids[1]})) == {ids[1]}
    assert mod.not_done(report({ids[0]: ok}), "kb", spec, (0, 1), frozenset(), rerun=frozenset({ids[0]})) == set(ids)
    with pytest.raises(SystemExit, match="not a task"):
        mod.not_done(both, "kb", spec, (0, 1), frozenset(), rerun=frozenset({"level1/999_none"}))
    with pytest.raises(SystemExit):  # argparse's error: --rerun names what --skip-done's reports judged
        mod.main(["--out", str(tmp_path / "o"), "--rerun", ids[0]])


@pytest.mark.parametrize("option", ["--rerender", "--amdkv-from", "--skip-done"])
def test_an_unreadable_earlier_report_is_refused_by_name_before_anything_runs(
        option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every option that reads earlier reports names each one it cannot use, and why, before any benchmark
    starts (session 26: a --skip-done path missing on the GPU machine ended a call in a traceback)."""
    mod = _script()
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"benchmarks": {"kb": {}}}))
    not_json, not_report = tmp_path / "notes.md", tmp_path / "results.jsonl"
    not_json.write_text("# a table\n")
    not_report.write_text(json.dumps({"task_id": "level1/1_x", "verdict": {}}) + "\n")
    missing = tmp_path / "missing.json"
    paths = [good, missing, not_json, not_report] if option != "--amdkv-from" else [missing]
    with pytest.raises(SystemExit) as exc:
        mod.main(["--out", str(tmp_path / "o"), "--only", "kb", option, *map(str, paths)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"{option}: {missing}: cannot be read (No such file or directory)" in err
    if option != "--amdkv-from":
        assert f"{not_json}: not JSON" in err and f"{not_report}: not an external_gpu.json report" in err
        assert str(good) + ":" not in err  # the readable one is not named
    assert not (tmp_path / "o").exists()


def test_a_harness_deadline_stops_a_running_job_as_not_run_so_a_later_call_runs_it_again(tmp_path: Path) -> None:
    """`--harness-deadline`: jobs start while time is left and every job ends by the deadline; one stopped
    there is `not_run: "deadline"` (never a timeout, which counts as run), and `--skip-done` runs it again.
    The per-job limit still gives a timeout row where it comes first."""
    mod = _script()
    ok = 'print("HARNESS_RESULT " + __import__("json").dumps({"ok": True, "correct": True}))'
    slow = "import time; time.sleep(60)"

    def job(tid: str, code: str) -> dict:
        return {"task_id": tid, "argv": [sys.executable, "-c", code], "env": None, "cwd": str(tmp_path)}

    t0 = time.monotonic()
    res = mod.run_harness("fake", [job("a", ok), job("b", slow), job("c", ok)], workers=1, budget=600,
                          per_job_timeout=300, log=io.StringIO(), deadline=4)
    took = time.monotonic() - t0
    assert res["tasks"]["a"]["correct"] is True
    assert res["tasks"]["b"]["not_run"] == "deadline" and "timeout" not in res["tasks"]["b"]
    assert res["tasks"]["c"] == {"ok": False, "not_run": "budget"}  # the deadline had come: never started
    assert res["ran"] == 1 and took < 30  # stopped at the deadline, not after the job's 60 s or its 300-s limit
    # the per-job limit first: the timeout row as without a deadline
    limited = mod.run_harness("fake", [job("b", slow)], workers=1, budget=600, per_job_timeout=1,
                              log=io.StringIO(), deadline=30)
    assert limited["tasks"]["b"]["timeout"] == 1 and "not_run" not in limited["tasks"]["b"]
    # a later call goes on from the report: the stopped job runs again, the finished one does not
    spec = f"kernelbench:{DATA / 'kernelbench'}?levels=1"
    done, stopped = sorted(t.id for t in mod.shard_tasks(spec, (0, 1)))
    report = tmp_path / "harness.json"
    report.write_text(json.dumps({"benchmarks": {"kb": {"harness": {"tasks": {
        done: res["tasks"]["a"], stopped: res["tasks"]["b"]}}}}}))
    assert mod.not_done(report, "kb", spec, (0, 1), frozenset(), side="harness") == {stopped}
