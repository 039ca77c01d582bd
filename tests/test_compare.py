"""The tolerance policy and comparators (amdkv.verify.compare), on hand-made tensors."""

from __future__ import annotations

import pytest
import torch

from amdkv.verify.compare import compare_case, compare_float


def golden_and_eager(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.softmax(x.double(), dim=-1)
    e = torch.softmax(x.to(dtype), dim=-1)
    return g, e


def test_accurate_candidate_passes_and_reports_errors() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 300)
    g, e = golden_and_eager(x, torch.float32)
    cand = torch.softmax(x.double(), dim=-1).float()  # more accurate than eager
    res = compare_case([cand], [e], [g], [x], "default", {})
    assert res.ok and res.max_abs_err is not None and res.allowed_abs_err > 0


def test_zero_output_on_tiny_valued_task_fails() -> None:
    torch.manual_seed(0)
    x = torch.randn(1000) * 1e-7
    res = compare_case([torch.zeros_like(x)], [x.clone()], [x.double()], [x], "default", {})
    assert not res.ok and res.reason == "value_mismatch"


def test_constant_output_fails() -> None:
    torch.manual_seed(0)
    x = torch.randn(500) * 1e-3
    const = torch.full_like(x, float(x.mean()))
    assert not compare_case([const], [x.clone()], [x.double()], [x], "default", {}).ok


def test_fp16_gets_slack_from_its_epsilon_and_eager_error() -> None:
    torch.manual_seed(0)
    x = torch.randn(32, 257)
    g, e = golden_and_eager(x, torch.float16)
    cand = g.half()  # correctly rounded: within fp16's own error
    assert compare_case([cand], [e], [g], [x], "default", {}).ok
    wrong = (g * 1.02).half()
    assert not compare_case([wrong], [e], [g], [x], "default", {}).ok


def test_nan_only_where_reference_has_nan() -> None:
    e = torch.tensor([1.0, float("nan"), 3.0])
    ok = compare_float(torch.tensor([1.0, float("nan"), 3.0]), e, e.double(), {"multiple": 8, "floor": 4, "rtol_ulps": 4})
    assert ok.ok
    bad = compare_case([torch.tensor([float("nan"), float("nan"), 3.0])], [e], [e.double()], [], "default", {})
    assert not bad.ok and bad.reason == "nan_mismatch"
    inf = compare_case([torch.tensor([1.0, float("inf"), 3.0])], [e], [e.double()], [], "default", {})
    assert not inf.ok and inf.reason == "nan_mismatch"


def test_shape_dtype_count_and_subclass_are_structural_failures() -> None:
    e = torch.ones(4, 4)
    assert compare_case([torch.ones(16)], [e], None, [], "default", {}).reason == "wrong_shape"
    assert compare_case([torch.ones(4, 4, dtype=torch.float64)], [e], None, [], "default", {}).reason == "wrong_dtype"
    assert compare_case([e, e], [e], None, [], "default", {}).reason == "wrong_output_count"

    class Sneaky(torch.Tensor):
        """A tensor subclass could override comparisons: never accepted as an output."""

    sub = torch.ones(4, 4).as_subclass(Sneaky)
    assert compare_case([sub], [e], None, [], "default", {}).reason == "tensor_subclass"


def test_integer_outputs_must_match_exactly() -> None:
    e = torch.arange(10)
    assert compare_case([e.clone()], [e], None, [], "default", {}).ok
    off = e.clone()
    off[3] += 1
    res = compare_case([off], [e], None, [], "default", {})
    assert not res.ok and "index (3,)" in res.message


def test_argmax_accepts_any_index_of_a_tie() -> None:
    x = torch.tensor([[1.0, 5.0, 5.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    ref = torch.tensor([1, 0])
    other_tie = torch.tensor([2, 3])
    assert compare_case([other_tie], [ref], None, [x], "argmax", {}).ok
    wrong = torch.tensor([3, 0])
    assert not compare_case([wrong], [ref], None, [x], "argmax", {}).ok


def test_topk_judges_indices_by_the_values_they_select() -> None:
    x = torch.tensor([[3.0, 1.0, 3.0, 0.5]])
    vals, idx = torch.topk(x, 2)
    swapped = idx.flip(-1)  # the tie broken the other way
    assert compare_case([vals, swapped], [vals, idx], [vals.double(), idx], [x], "topk", {}).ok
    dup = torch.tensor([[0, 0]])
    assert not compare_case([vals, dup], [vals, idx], [vals.double(), idx], [x], "topk", {}).ok
    bad = torch.tensor([[0, 1]])
    assert not compare_case([vals, bad], [vals, idx], [vals.double(), idx], [x], "topk", {}).ok


def test_scalar_loss_tolerance() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(10000), torch.randn(10000)
    g = ((a.double() - b.double()) ** 2).mean()
    e = ((a - b) ** 2).mean()
    assert compare_case([e.clone()], [e], [g], [a, b], "scalar", {}).ok
    assert not compare_case([e * 1.001], [e], [g], [a, b], "scalar", {}).ok
    # the H200 case: eager exact by chance (error 0), a correct kernel 8.7 ulps off -> ok;
    # 100 ulps off -> not ok
    g32 = torch.tensor(14.7844, dtype=torch.float64)
    exact = g32.float()
    ulp = float(torch.finfo(torch.float32).eps) * 14.7844
    assert compare_case([exact + 8.7 * ulp], [exact], [g32], [], "scalar", {}).ok
    assert not compare_case([exact + 8.7 * ulp], [exact], [g32], [], "default", {}).ok
    assert not compare_case([exact + 100 * ulp], [exact], [g32], [], "scalar", {}).ok


def test_quantised_codes_may_miss_a_tie_but_not_round_wrongly() -> None:
    torch.manual_seed(0)
    ref = torch.randint(-128, 127, (100, 100), dtype=torch.int64).to(torch.int8)
    one_tie = ref.clone()
    one_tie[3, 4] += 1
    tol = {"int_steps": 1, "int_steps_fraction": 0.001}
    assert compare_case([one_tie], [ref], None, [], "default", tol).ok
    assert not compare_case([one_tie], [ref], None, [], "default", {}).ok  # exact by default
    floor_everywhere = ref.clone()
    floor_everywhere[::2] -= 1
    assert not compare_case([floor_everywhere], [ref], None, [], "default", tol).ok
    two_steps = ref.clone()
    two_steps[0, 0] += 2
    assert not compare_case([two_steps], [ref], None, [], "default", tol).ok


def test_float32_work_path_still_catches_one_bad_element() -> None:
    """Performance-case goldens are float32: the comparison runs in float32 and must still find a
    single wrong element among millions, and report it at its position."""
    from amdkv.verify.compare import DEFAULT_TOLERANCE, compare_float

    g = torch.randn(1 << 20)
    e = g.clone()
    c = g.clone()
    c[123_457] += 1e-3
    res = compare_float(c.view(1024, 1024), e.view(1024, 1024), g.view(1024, 1024), DEFAULT_TOLERANCE)
    assert not res.ok and "1/1048576" in res.message
    assert compare_float(g.clone(), e, g, DEFAULT_TOLERANCE).ok


def test_reference_stats_cache_is_per_tensor_pair() -> None:
    """The eager-error/rms cache must never hand one pair's numbers to another pair."""
    from amdkv.verify.compare import DEFAULT_TOLERANCE, compare_float

    g = torch.randn(4096, dtype=torch.float64)
    loose_eager = g + 1e-3  # big eager error -> big allowance
    tight_eager = g.clone()
    cand = g + 5e-4
    memo: dict = {}
    assert compare_float(cand, loose_eager, g, DEFAULT_TOLERANCE, memo).ok
    assert not compare_float(cand, tight_eager, g, DEFAULT_TOLERANCE, memo).ok
    assert compare_float(cand, loose_eager, g, DEFAULT_TOLERANCE, memo).ok
    assert len(memo) == 2  # one entry per expected-output pair


def test_wrong_shape_is_refused_even_with_equal_numel() -> None:
    from amdkv.verify.compare import DEFAULT_TOLERANCE, compare_float

    g = torch.randn(8, 4)
    res = compare_float(g.t().contiguous(), g, g, DEFAULT_TOLERANCE)
    assert not res.ok and res.reason == "wrong_shape"


def test_same_bits_shortcut() -> None:
    from amdkv.verify.verifier import _same_bits

    a = [torch.tensor([1.0, float("nan")]), 3]
    assert _same_bits(a, [a[0].clone(), 3])  # NaN bits equal: bitwise, not numerically
    assert not _same_bits(a, [torch.tensor([1.0, 2.0]), 3])
    assert not _same_bits(a, [a[0].clone(), 4])
    assert not _same_bits(a, [a[0].double(), 3])
    assert _same_bits([torch.tensor(2.5)], [torch.tensor(2.5)])  # 0-dim (a loss scalar)
    assert not _same_bits([torch.tensor(2.5)], [torch.tensor(2.0)])

    class Sub(torch.Tensor):
        """Same bytes, but a subclass: not the same output."""

    assert not _same_bits(a, [a[0].clone().as_subclass(Sub), 3])


def _chunked_scenarios() -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(candidate, eager, golden) over 10,000 fp16 elements: a pass, mismatches spread over chunks,
    NaN/Inf agreement and disagreement, and a golden in float32 (a performance case)."""
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(100, 100, dtype=torch.float64, generator=gen) * 3
    e = g.half()
    ok = (g + 2e-3 * torch.randn(100, 100, dtype=torch.float64, generator=gen)).half()
    bad = ok.clone()
    bad.view(-1)[[17, 4321, 9999]] += 0.5  # in three different chunks of 1,000
    e_nan, g_nan = e.clone(), g.clone()
    e_nan.view(-1)[[5, 5005]] = float("nan")
    g_nan.view(-1)[[5, 5005]] = float("nan")
    ok_nan = ok.clone()
    ok_nan.view(-1)[[5, 5005]] = float("nan")
    bad_nan = ok_nan.clone()
    bad_nan.view(-1)[[6, 7006]] = float("inf")
    bad_values_nan = ok_nan.clone()
    bad_values_nan.view(-1)[[17, 9999]] += 0.5
    return {"pass": (ok, e, g), "values": (bad, e, g), "nan_agree": (ok_nan, e_nan, g_nan),
            "nan_agree_values_bad": (bad_values_nan, e_nan, g_nan),
            "nan_disagree": (bad_nan, e_nan, g_nan), "float32_golden": (bad, e, g.float()),
            "all_equal": (e.clone(), e, e.double())}


@pytest.mark.parametrize("name", list(_chunked_scenarios()))
def test_a_chunked_comparison_gives_the_whole_tensor_verdict(name: str) -> None:
    """Outputs are compared COMPARE_CHUNK_ELEMENTS at a time (a KernelBench level-1 output of 1e9
    elements needed ~48 GB of GPU memory whole). Ten chunks give the verdict, reason, counts and worst
    element of one; the allowance may differ in the last digits (float64 sums in another order)."""
    from amdkv.verify.compare import DEFAULT_TOLERANCE, compare_float

    c, e, g = _chunked_scenarios()[name]
    whole = compare_float(c, e, g, DEFAULT_TOLERANCE)
    memo: dict = {}
    chunked = compare_float(c, e, g, DEFAULT_TOLERANCE, memo, chunk=1000)
    again = compare_float(c, e, g, DEFAULT_TOLERANCE, memo, chunk=1000)  # the memoised stats
    assert (chunked.ok, chunked.reason) == (whole.ok, whole.reason) == (again.ok, again.reason)
    assert memo, "the chunked path keeps the eager/golden statistics"
    if whole.reason == "nan_mismatch":
        assert chunked.message == whole.message
        return
    for field in ("max_abs_err", "ref_err"):
        assert getattr(chunked, field) == getattr(whole, field), field
    for field in ("allowed_abs_err", "max_rel_err"):
        assert getattr(chunked, field) == pytest.approx(getattr(whole, field), rel=1e-6), field
    if not whole.ok:
        # "n/N elements outside tolerance; worst: got X, expected Y (...)": same counts, same element
        assert chunked.message.split("(")[0] == whole.message.split("(")[0]


def test_bitwise_equal_compares_by_slices_and_finds_every_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The input-mutation check's comparison holds one slice's extra memory, not the input's (a 16-GiB
    input asked for 16 GiB more on the H100 of session 25), and still sees a single changed byte
    anywhere, in any dtype, NaN payloads included."""
    from amdkv.verify import compare

    monkeypatch.setattr(compare, "BITWISE_CHUNK_BYTES", 64)
    sizes: list[int] = []
    real_equal = torch.equal

    def spying_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
        sizes.append(x.numel())
        return real_equal(x, y)

    monkeypatch.setattr(torch, "equal", spying_equal)
    a = torch.arange(1000, dtype=torch.float32)
    assert compare.bitwise_equal(a, a.clone())
    assert sizes and max(sizes) <= 64  # 4000 bytes, never more than 64 of them at once
    for where in (0, 500, 999):  # the first slice, a middle one, the last (short) one
        b = a.clone()
        b[where] = -1.0
        assert not compare.bitwise_equal(a, b)
    nan = torch.full((300,), float("nan"), dtype=torch.float64)
    other_nan = nan.clone()
    other_nan.view(torch.int64)[299] ^= 1  # still a NaN, other bits
    assert compare.bitwise_equal(nan, nan.clone()) and not compare.bitwise_equal(nan, other_nan)
    flags = torch.zeros(200, dtype=torch.bool)
    flipped = flags.clone()
    flipped[130] = True
    assert compare.bitwise_equal(flags, flags.clone()) and not compare.bitwise_equal(flags, flipped)
    assert compare.bitwise_equal(torch.tensor(3.0), torch.tensor(3.0))  # 0-dim
    assert not compare.bitwise_equal(a, a.to(torch.float64)) and not compare.bitwise_equal(a, a[:10])
