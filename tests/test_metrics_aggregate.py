"""compute_metrics: keys, JSON form, breakdowns, and the platform rule."""

from __future__ import annotations

import json
import math
import random

import pytest

from amdkv.metrics import MetricInputError, SampleResult, compute_metrics

ENTRY_KEYS = {"name", "value", "n", "ci95", "aggregation", "platform", "reportable"}


def ok(task, idx, speedup, *, platform="rocm", level=1, op="elementwise", dtype="fp32",
       turn=None, sol=None):
    return SampleResult(task, idx, turn=turn, compiled=True, correct=True, status="ok",
                        speedup=speedup, sol=sol, platform=platform, level=level,
                        op_family=op, dtype=dtype)


def fail(task, idx, *, platform="rocm", level=1, op="elementwise", dtype="fp32", turn=None,
         status="mismatch"):
    return SampleResult(task, idx, turn=turn, compiled=status != "compile_error",
                        correct=False, status=status, platform=platform, level=level,
                        op_family=op, dtype=dtype)


def entries(d):
    """Every metric entry in a report, however deep (breakdowns, per_platform)."""
    if isinstance(d, dict):
        if "aggregation" in d:
            yield d
            for sub in d.get("per_platform", {}).values():
                yield from entries(sub)
        else:
            for v in d.values():
                yield from entries(v)


def suite():
    """Three tasks, three samples each, one platform.

    a (level 1): 4.0, 2.0, fail      b (level 1): fail x3      c (level 2, gemm): 0.5 x3
    """
    return [ok("a", 0, 4.0, sol=0.5), ok("a", 1, 2.0), fail("a", 2),
            fail("b", 0), fail("b", 1), fail("b", 2, status="compile_error"),
            ok("c", 0, 0.5, level=2, op="gemm"), ok("c", 1, 0.5, level=2, op="gemm"),
            ok("c", 2, 0.5, level=2, op="gemm")]


def test_top_level_values():
    r = compute_metrics(suite(), ks=(1, 3), ps=(1.0,), bootstrap=200, seed=0)
    assert r["n_tasks"] == 3 and r["n_samples"] == 9 and r["n_runs"] == 9
    assert r["platforms"] == ["rocm"]
    assert r["corr@1"]["value"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert r["corr@3"]["value"] == pytest.approx((1 + 0 + 1) / 3)
    assert r["pass@1"]["value"] == r["corr@1"]["value"]
    assert r["pass@1"]["name"] == "pass@1" and "alias of corr@1" in r["pass@1"]["aggregation"]
    assert r["compile@1"]["value"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    # fast_1.0: a has 2 of 3 samples > 1, b none, c none
    assert r["fast_1.0"]["value"] == pytest.approx((2 / 3) / 3)
    # per task over correct samples: a sqrt(8), c 0.5
    assert r["geomean_speedup"]["value"] == pytest.approx(math.sqrt(math.sqrt(8) * 0.5))
    # all tasks: a (4*2*1)^(1/3) = 2, b 1, c 0.5 -> (2*1*0.5)^(1/3) = 1
    assert r["geomean_speedup_all"]["value"] == pytest.approx(1.0)
    assert r["mean_sol"]["value"] == pytest.approx(0.5) and r["mean_sol"]["n"] == 1
    assert "corr@1_turns" not in r and "compile@1_turns" not in r


def test_every_entry_carries_n_and_aggregation_and_is_json():
    r = compute_metrics(suite(), bootstrap=50)
    text = json.dumps(r, allow_nan=False)
    assert json.loads(text) == r
    found = list(entries(r))
    assert len(found) > 20
    for e in found:
        assert ENTRY_KEYS <= set(e), e
        assert isinstance(e["n"], int) and e["aggregation"]
        if not e["reportable"]:
            assert e["value"] is None and e["reason"]


def test_breakdowns_by_level_op_family_dtype_platform():
    r = compute_metrics(suite(), bootstrap=0)
    b = r["breakdowns"]
    assert set(b) == {"level", "op_family", "dtype", "platform"}
    assert set(b["level"]) == {"1", "2"}
    assert b["level"]["1"]["n_tasks"] == 2
    assert b["level"]["1"]["corr@1"]["value"] == pytest.approx((2 / 3 + 0) / 2)
    assert b["level"]["2"]["geomean_speedup"]["value"] == pytest.approx(0.5)
    assert set(b["op_family"]) == {"elementwise", "gemm"}
    assert b["dtype"]["fp32"]["n_tasks"] == 3
    assert b["platform"]["rocm"]["corr@1"]["value"] == r["corr@1"]["value"]


def test_missing_metadata_groups_as_unknown():
    r = compute_metrics([SampleResult("t", 0, correct=True, status="ok", speedup=2.0,
                                      platform="cuda")], ks=(1,), bootstrap=0)
    assert set(r["breakdowns"]["level"]) == {"unknown"}
    assert r["breakdowns"]["dtype"]["unknown"]["corr@1"]["value"] == 1.0


def test_single_task_single_sample_and_too_few_samples_for_k():
    r = compute_metrics([ok("t", 0, 3.0)], ks=(1, 3), bootstrap=100)
    assert r["corr@1"]["value"] == 1.0 and r["corr@1"]["n"] == 1
    assert r["geomean_speedup"]["value"] == pytest.approx(3.0)
    assert r["geomean_speedup"]["ci95"] == pytest.approx([3.0, 3.0])
    assert not r["corr@3"]["reportable"]
    assert r["corr@3"]["tasks_with_too_few_samples"] == {"t": 1}


def test_mixed_platforms_are_reported_per_platform_only():
    results = [ok("a", 0, 2.0, platform="cuda"), fail("b", 0, platform="cuda"),
               ok("c", 0, 8.0, platform="rocm")]
    r = compute_metrics(results, ks=(1,), bootstrap=0)
    assert r["platforms"] == ["cuda", "rocm"]
    # correctness is pooled over tasks (and says which platforms)
    assert r["corr@1"]["value"] == pytest.approx(2 / 3) and r["corr@1"]["platform"] is None
    for key in ("fast_1.0", "geomean_speedup", "geomean_speedup_all", "mean_sol"):
        top = r[key]
        assert top["value"] is None and not top["reportable"]
        assert "never pooled" in top["reason"]
        assert set(top["per_platform"]) == {"cuda", "rocm"}
    per = r["geomean_speedup"]["per_platform"]
    assert per["cuda"]["value"] == pytest.approx(2.0) and per["cuda"]["platform"] == "cuda"
    assert per["rocm"]["value"] == pytest.approx(8.0)
    assert r["geomean_speedup_all"]["per_platform"]["cuda"]["value"] == pytest.approx(math.sqrt(2))
    by_platform = r["breakdowns"]["platform"]
    assert by_platform["cuda"]["geomean_speedup_all"]["value"] == pytest.approx(math.sqrt(2))
    assert by_platform["rocm"]["fast_1.0"]["value"] == 1.0
    # the pooled geomeans (4.0 over correct, 2^(1/3)*... over all) appear nowhere
    pooled = {math.sqrt(2.0 * 8.0), (2.0 * 1.0 * 8.0) ** (1 / 3)}
    for e in entries(r):
        if e["name"].startswith("geomean") and e["value"] is not None:
            assert all(not math.isclose(e["value"], v) for v in pooled), e
    # a level group spanning both platforms is not pooled either
    assert not r["breakdowns"]["level"]["1"]["geomean_speedup"]["reportable"]


def test_turn_keys_appear_when_turns_exist():
    results = [fail("a", 0, turn=0), ok("a", 0, 2.0, turn=1), ok("b", 0, 1.5, turn=0),
               fail("c", 0, turn=0), fail("c", 0, turn=1)]
    r = compute_metrics(results, ks=(1, 2), bootstrap=0)
    assert r["corr@1_turns"]["value"] == pytest.approx(1 / 3)
    assert r["corr@2_turns"]["value"] == pytest.approx(2 / 3)
    assert r["compile@1_turns"]["value"] == pytest.approx(1.0)
    assert r["n_runs"] == 3 and r["n_samples"] == 5
    # independent-sample reading: one run per task, so corr@2 is not reportable
    assert not r["corr@2"]["reportable"]
    assert r["settings"]["with_turns"] is True


def test_excluded_samples_are_counted():
    results = suite() + [fail("d", 0, status="infra_error"),
                         fail("a", 3, status="unverifiable")]
    r = compute_metrics(results, ks=(1,), bootstrap=0)
    assert r["excluded_samples"] == {"infra_error": 1, "unverifiable": 1}
    assert r["corr@1"]["n"] == 3
    assert r["corr@1"]["tasks_without_judged_samples"] == ["d"]


def test_report_is_deterministic_and_order_free():
    results = suite()
    shuffled = results[:]
    random.Random(5).shuffle(shuffled)
    assert compute_metrics(results, seed=3) == compute_metrics(shuffled, seed=3)


@pytest.mark.parametrize("kwargs,fragment", [
    ({"ks": ()}, "ks is empty"), ({"ks": (0,)}, "k = 0"), ({"ps": (-1.0,)}, "p = -1.0"),
    ({"bootstrap": -5}, "resamples"), ({"seed": -1}, "seed"),
])
def test_bad_arguments(kwargs, fragment):
    with pytest.raises(MetricInputError, match=fragment):
        compute_metrics(suite(), **kwargs)


def test_empty_results_raise():
    with pytest.raises(MetricInputError, match="nothing to score"):
        compute_metrics([])
