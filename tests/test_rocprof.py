"""rocprofv3 command line and kernel-trace parsing (recorded-format samples; not run on hardware)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amdkv.verify import rocprof

DATA = Path(__file__).parent / "data" / "rocprof"
FLUSH = r"FillFunctor"


def test_build_command_csv():
    cmd = rocprof.build_command(["python", "bench.py", "--n", "3"], "/tmp/out", output_name="run1",
                                rocprofv3="/opt/rocm/bin/rocprofv3")
    assert cmd == ["/opt/rocm/bin/rocprofv3", "--kernel-trace", "--output-format", "csv", "-d", "/tmp/out",
                   "-o", "run1", "--", "python", "bench.py", "--n", "3"]


def test_build_command_json_with_filters():
    cmd = rocprof.build_command(["./a.out"], "out", output_format="json", kernel_include_regex="add|Fill",
                                kernel_exclude_regex="nccl", rocprofv3="rocprofv3")
    assert cmd[:4] == ["rocprofv3", "--kernel-trace", "--output-format", "json"]
    assert cmd[cmd.index("--kernel-include-regex") + 1] == "add|Fill"
    assert cmd[cmd.index("--kernel-exclude-regex") + 1] == "nccl"
    assert cmd[-2:] == ["--", "./a.out"]


@pytest.mark.parametrize("bad", [dict(argv=[]), dict(argv=["x"], output_format="pftrace")])
def test_build_command_rejects(bad):
    with pytest.raises(ValueError):
        rocprof.build_command(bad.pop("argv"), "out", **bad)


def test_parse_csv():
    recs = rocprof.parse_kernel_trace_csv(DATA / "kernel_trace.csv")
    assert len(recs) == 7
    assert recs[1].name == "add_kernel" and recs[1].duration_ns == 5120 and recs[1].agent == "Agent 4"
    assert recs[0].dispatch_id == 1 and recs[0].correlation_id == 1
    assert [r.start_ns for r in recs] == sorted(r.start_ns for r in recs)


def test_parse_csv_text_and_loose_headers():
    text = '"Kind","Kernel-Name","Start_Timestamp","End_Timestamp"\n"KERNEL_DISPATCH","k",10,25\n' \
           '"MEMORY_COPY","copy",30,40\n'
    recs = rocprof.parse_kernel_trace_csv(text)
    assert [(r.name, r.duration_ns) for r in recs] == [("k", 15)]
    with pytest.raises(ValueError):
        rocprof.parse_kernel_trace_csv('"a","b"\n1,2\n')


def test_parse_json_matches_csv():
    a = rocprof.parse_kernel_trace(DATA / "kernel_trace.csv")
    b = rocprof.parse_kernel_trace(DATA / "results.json")
    assert [(r.name, r.start_ns, r.end_ns, r.dispatch_id) for r in a] == \
        [(r.name, r.start_ns, r.end_ns, r.dispatch_id) for r in b]
    assert b[0].agent == "4" and b[0].correlation_id == 1


def test_per_call_ms_splits_on_flush_marker():
    recs = rocprof.parse_kernel_trace(DATA / "kernel_trace.csv")
    assert rocprof.per_call_ms(recs, FLUSH) == pytest.approx([0.00512, 0.0062, 0.00524])
    assert rocprof.per_call_ms(recs, FLUSH, skip=1) == pytest.approx([0.0062, 0.00524])
    s = rocprof.summarize(rocprof.per_call_ms(recs, FLUSH))
    assert s["ms"] == pytest.approx(0.00524) and s["method"].startswith("rocprofv3")


def test_find_trace_files(tmp_path):
    sub = tmp_path / "host" / "123"
    sub.mkdir(parents=True)
    (sub / "123_kernel_trace.csv").write_text((DATA / "kernel_trace.csv").read_text())
    (tmp_path / "run_results.json").write_text("{}")
    names = [p.name for p in rocprof.find_trace_files(tmp_path)]
    assert names == ["123_kernel_trace.csv", "run_results.json"]


def test_find_rocprofv3_absent_here(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    if Path("/opt/rocm/bin/rocprofv3").exists():
        pytest.skip("rocprofv3 is installed in /opt/rocm: this test checks the not-found path")
    assert rocprof.find_rocprofv3() is None
