"""SampleResult validation, from_verdict_dict, and grouping into runs and tasks."""

from __future__ import annotations

import json

import pytest

from amdkv.metrics import MetricInputError, SampleResult, from_verdict_dict, group_by_task


def test_from_verdict_dict_reads_keys_and_defaults_missing_to_none():
    meta = {"id": "l1_relu", "level": 1, "op_family": "elementwise", "dtypes": ["fp32"]}
    verdict = {"status": "ok", "compiled": True, "correct": True, "speedup": 1.5, "sol": 0.4,
               "platform": "cuda", "reason": None, "latencies": [1, 2]}
    r = from_verdict_dict(meta, verdict, sample_index=2, turn=1)
    assert (r.task_id, r.sample_index, r.turn) == ("l1_relu", 2, 1)
    assert (r.status, r.compiled, r.correct, r.speedup, r.sol, r.platform) == (
        "ok", True, True, 1.5, 0.4, "cuda")
    assert (r.level, r.op_family, r.dtype) == (1, "elementwise", "fp32")

    bare = from_verdict_dict({"task_id": "t"}, {}, sample_index=0, turn=None)
    for field in ("turn", "status", "compiled", "correct", "speedup", "sol", "platform",
                  "level", "op_family", "dtype"):
        assert getattr(bare, field) is None, field


def test_from_verdict_dict_joins_several_dtypes_stably():
    a = from_verdict_dict({"id": "t", "dtypes": ("fp16", "bf16")}, {}, 0, None)
    b = from_verdict_dict({"id": "t", "dtypes": ["bf16", "fp16"]}, {}, 0, None)
    assert a.dtype == b.dtype == "bf16+fp16"


def test_from_verdict_dict_needs_an_id():
    with pytest.raises(MetricInputError, match="neither `id` nor `task_id`"):
        from_verdict_dict({"level": 1}, {}, 0, None)


@pytest.mark.parametrize("kwargs,fragment", [
    ({"status": "passed"}, "unknown status"),
    ({"speedup": 0.0}, "speedup"),
    ({"speedup": float("nan")}, "speedup"),
    ({"speedup": -2.0}, "speedup"),
    ({"sol": -0.1}, "sol"),
    ({"correct": "yes"}, "correct must be"),
    ({"turn": -1}, "turn = -1"),
    ({"sample_index": 1.5}, "sample_index"),
    ({"task_id": ""}, "task_id"),
])
def test_invalid_records_are_rejected(kwargs, fragment):
    base = {"task_id": "t", "sample_index": 0}
    base.update(kwargs)
    with pytest.raises(MetricInputError, match=fragment):
        SampleResult(**base)


def test_round_trip_through_json():
    r = SampleResult("t", 3, turn=2, compiled=True, correct=False, status="mismatch",
                     speedup=None, sol=None, platform="rocm", level=2, op_family="gemm",
                     dtype="fp16")
    assert SampleResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    with pytest.raises(MetricInputError, match="unknown SampleResult field"):
        SampleResult.from_dict({**r.to_dict(), "speed_up": 2.0})


def test_correct_requires_agreeing_status_and_compiled_is_inferred_only_from_correct():
    assert SampleResult("t", 0, correct=True, status="ok").is_correct
    assert SampleResult("t", 0, correct=True, status=None).is_correct
    assert not SampleResult("t", 0, correct=True, status="hack_detected").is_correct
    assert not SampleResult("t", 0, correct=None, status="ok").is_correct
    assert SampleResult("t", 0, correct=True, compiled=None).is_compiled
    assert not SampleResult("t", 0, correct=False, compiled=None).is_compiled
    assert not SampleResult("t", 0, compiled=True, status="infra_error").is_compiled


def test_duplicates_and_cross_platform_copies_are_rejected():
    with pytest.raises(MetricInputError, match="appears twice"):
        group_by_task([SampleResult("t", 0), SampleResult("t", 0)])
    with pytest.raises(MetricInputError, match="several platforms"):
        group_by_task([SampleResult("t", 0, platform="cuda"),
                       SampleResult("t", 0, platform="rocm")])
    with pytest.raises(MetricInputError, match="turn number"):
        group_by_task([SampleResult("t", 0, turn=0), SampleResult("t", 0, turn=None)])


def test_task_metadata_must_agree():
    with pytest.raises(MetricInputError, match="different level"):
        group_by_task([SampleResult("t", 0, level=1), SampleResult("t", 1, level=2)])


def test_grouping_is_sorted_and_orders_turns():
    samples = [SampleResult("b", 0), SampleResult("a", 1, turn=2), SampleResult("a", 1, turn=0),
               SampleResult("a", 1, turn=1), SampleResult("a", 0, turn=0)]
    tasks = group_by_task(samples)
    assert [t.task_id for t in tasks] == ["a", "b"]
    a = tasks[0]
    assert [r.sample_index for r in a.runs] == [0, 1]
    assert [s.turn for s in a.runs[1].samples] == [0, 1, 2]
    assert len(a.samples) == 4
