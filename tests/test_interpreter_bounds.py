"""The interpreter's bounds checker (amdkv/verify/interpreter_bounds.py): argument spans, the check
of one access, and the checker installed into the real Triton interpreter (in a subprocess, since
installing patches the interpreter for the life of the process). The adversarial set
(test_adversarial.py) runs the out-of-bounds candidates through the whole verifier."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from amdkv.verify.interpreter_bounds import (ACCESS_ATOMIC, ACCESS_LOAD, ACCESS_STORE, ArgSpan,
                                             InterpreterBoundsChecker, OutOfBoundsAccess, argument_spans,
                                             tensor_byte_span)

ROOT = Path(__file__).resolve().parent.parent


def enumerated_span(t: torch.Tensor) -> tuple[int, int] | None:
    """The oracle: lowest and one-past-highest byte over every element, enumerated one by one."""
    if t.numel() == 0:
        return None
    size = t.element_size()
    addrs = [t.data_ptr() + size * sum(i * s for i, s in zip(idx, t.stride()))
             for idx in itertools.product(*(range(n) for n in t.shape))]
    return min(addrs), max(addrs) + size


BASE = torch.arange(7 * 10, dtype=torch.float32).reshape(7, 10)


@pytest.mark.parametrize("make", [
    lambda: BASE,                                   # contiguous
    lambda: BASE[:, ::3],                           # strided: gaps between elements, and a tail after the last
    lambda: BASE.t(),                               # transposed
    lambda: BASE[2:5, 3:8],                         # sliced: starts inside, ends before the parent's end
    lambda: BASE[4],                                # a row
    lambda: BASE[:, 9],                             # a column (stride 10)
    lambda: BASE[3, 4],                             # 0-dim view
    lambda: torch.tensor(3.0, dtype=torch.float64),  # 0-dim tensor
    lambda: torch.zeros(5).expand(4, 5),            # stride 0
    lambda: torch.zeros(3, 4, dtype=torch.float16).permute(1, 0)[1:],
    lambda: torch.zeros(6, dtype=torch.bool)[1::2],
    lambda: torch.zeros(2, 3, 4, dtype=torch.int8).transpose(0, 2),
], ids=["contiguous", "strided", "transposed", "sliced", "row", "column", "0dim-view", "0dim", "expanded",
        "fp16-permuted-sliced", "bool-strided", "int8-3d"])
def test_span_matches_every_element(make) -> None:
    t = make()
    assert tensor_byte_span(t) == enumerated_span(t)


def test_span_of_strided_view_ends_at_its_last_element_not_the_parent() -> None:
    view = BASE[:, ::3]  # columns 0, 3, 6, 9 of a (7, 10) float32 tensor
    lo, hi = tensor_byte_span(view)
    assert lo == BASE.data_ptr() and hi == BASE.data_ptr() + 4 * (6 * 10 + 9 + 1)
    lo, hi = tensor_byte_span(BASE[:, :8:3])  # columns 0, 3, 6: stops 3 elements before the row's end
    assert hi == BASE.data_ptr() + 4 * (6 * 10 + 6 + 1)


@pytest.mark.parametrize("t", [torch.empty(0), torch.empty(3, 0), BASE[:, 5:5], BASE[7:]])
def test_empty_tensors_have_no_span(t) -> None:
    assert tensor_byte_span(t) is None
    assert argument_spans([("e", t)]) == []


def test_argument_spans_follow_the_interpreter_s_argument_forms() -> None:
    """Tuples, reinterpret wrappers and host tensor descriptors carry their tensors' spans; an
    object that merely has a `data_ptr` gets none."""
    triton = pytest.importorskip("triton", reason="argument wrappers are Triton's classes")
    from triton.tools.tensor_descriptor import TensorDescriptor

    a, b = torch.zeros(4), torch.zeros(2, 3)
    raw = torch.zeros(8, dtype=torch.uint8)
    desc = TensorDescriptor.from_tensor(torch.zeros(16, 16), [8, 8])

    class FakePointer:
        def data_ptr(self) -> int:
            return 4096

    spans = argument_spans([("ptrs", (a, b)), ("bytes", triton.reinterpret(raw, triton.language.int8)),
                            ("desc", desc), ("fake", FakePointer()), ("n", 7)])
    assert [s.name for s in spans] == ["ptrs[0]", "ptrs[1]", "bytes", "desc.base"]
    assert (spans[1].lo, spans[1].hi) == tensor_byte_span(b) and spans[1].shape == (2, 3)
    assert (spans[2].lo, spans[2].hi) == tensor_byte_span(raw) and spans[2].dtype == "uint8"
    assert (spans[3].lo, spans[3].hi) == tensor_byte_span(desc.base)


# ------------------------------------------------------------------------ one access at a time
def launched(*named: tuple[str, torch.Tensor], kernel: str = "k") -> InterpreterBoundsChecker:
    checker = InterpreterBoundsChecker()
    checker.begin_launch(kernel)
    checker.set_arguments(named)
    return checker


def addresses(t: torch.Tensor, offsets) -> np.ndarray:
    """Byte addresses of elements `offsets` (may run outside `t`) from `t`'s first element."""
    return (t.data_ptr() + t.element_size() * np.asarray(offsets, dtype=np.int64)).astype(np.uint64)


def test_accesses_inside_pass_and_masked_off_lanes_never_count() -> None:
    x = torch.zeros(100)
    checker = launched(("x_ptr", x))
    offs = np.arange(128)
    checker.check(ACCESS_LOAD, addresses(x, offs), offs < 100, 4)
    wild = np.where(offs < 100, offs, offs + (1 << 40))           # masked-off lanes point far away
    checker.check(ACCESS_STORE, addresses(x, wild), offs < 100, 4)
    checker.check(ACCESS_STORE, addresses(x, -offs - 1), np.zeros(128, dtype=bool), 4)  # all masked off
    checker.check(ACCESS_ATOMIC, addresses(x, [99]), None, 4)     # no mask: every lane active
    assert checker.violation is None


def test_one_lane_past_the_end_is_refused_with_a_precise_message() -> None:
    x, out = torch.zeros(64), torch.zeros(40)
    checker = launched(("x_ptr", x), ("out_ptr", out), kernel="_relu_rows")
    offs = np.arange(64)
    with pytest.raises(OutOfBoundsAccess) as info:
        checker.check(ACCESS_STORE, addresses(out, offs), offs < 43, 4)
    v = checker.violation
    assert v.kernel == "_relu_rows" and v.access == ACCESS_STORE
    assert (v.bad_lanes, v.active_lanes) == (3, 43)
    assert v.address == out.data_ptr() + 4 * 40                    # the first bad lane in lane order
    span, side, gap = v.nearest()
    assert span.name == "out_ptr" and side == "past the end of" and gap == 4
    msg = str(info.value)
    assert msg == v.message
    assert "`_relu_rows` stored to" in msg and "3 of 43 active lane(s)" in msg
    assert "element offset 40 from `out_ptr`" in msg and "1 element(s) past the end" in msg


def test_before_the_start_and_the_element_straddling_the_end_are_refused() -> None:
    out = torch.zeros(16)
    checker = launched(("out_ptr", out))
    with pytest.raises(OutOfBoundsAccess):
        checker.check(ACCESS_STORE, addresses(out, [-1]), None, 4)
    span, side, gap = checker.violation.nearest()
    assert side == "before the start of" and gap == 4
    assert "element offset -1" in checker.violation.message
    checker.reset()
    straddle = np.array([out.data_ptr() + 62], dtype=np.uint64)  # bytes 62..65 of a 64-byte tensor
    with pytest.raises(OutOfBoundsAccess):
        checker.check(ACCESS_LOAD, straddle, None, 4)
    assert "byte offset 62" in checker.violation.message


def test_an_access_spread_over_several_arguments_passes_lane_by_lane() -> None:
    storage = torch.zeros(300)
    a, gap, b = storage[:100], storage[100:200], storage[200:]       # `gap` is not passed
    checker = launched(("a", a), ("b", b))
    both = np.concatenate([addresses(a, np.arange(100)), addresses(b, np.arange(100))])
    checker.check(ACCESS_LOAD, both, None, 4)
    with pytest.raises(OutOfBoundsAccess):
        checker.check(ACCESS_LOAD, np.concatenate([both, addresses(gap, [5])]), None, 4)
    assert checker.violation.bad_lanes == 1


def test_touching_arguments_merge_so_an_element_across_their_boundary_passes() -> None:
    storage = torch.zeros(8, dtype=torch.int32)
    low, high = storage[:4].view(torch.int16), storage[4:]
    checker = launched(("low", low), ("high", high))
    across = np.array([storage.data_ptr() + 14], dtype=np.uint64)  # 4 bytes: 2 in `low`, 2 in `high`
    checker.check(ACCESS_LOAD, across, None, 4)
    assert checker.violation is None


def test_mask_broadcast_to_the_pointers_shape() -> None:
    x = torch.zeros(4, 8)
    checker = launched(("x", x))
    ptrs = addresses(x, np.arange(48).reshape(6, 8))               # rows 4 and 5 are outside
    checker.check(ACCESS_LOAD, ptrs, (np.arange(6) < 4)[:, None], 4)
    with pytest.raises(OutOfBoundsAccess):
        checker.check(ACCESS_LOAD, ptrs, np.ones((1, 8), dtype=bool), 4)
    assert checker.violation.bad_lanes == 16


def test_no_launch_or_no_tensor_arguments_refuses_every_access() -> None:
    checker = InterpreterBoundsChecker()
    x = torch.zeros(4)
    with pytest.raises(OutOfBoundsAccess, match="passed no tensor with elements"):
        checker.check(ACCESS_LOAD, addresses(x, [0]), None, 4)
    checker = launched(("empty", torch.zeros(0)), kernel="k2")
    with pytest.raises(OutOfBoundsAccess, match="`k2` loaded from"):
        checker.check(ACCESS_LOAD, addresses(x, [0]), None, 4)


def test_the_first_violation_is_kept_until_reset() -> None:
    x = torch.zeros(4)
    checker = launched(("x", x))
    for off in (10, 20):
        with pytest.raises(OutOfBoundsAccess):
            checker.check(ACCESS_STORE, addresses(x, [off]), None, 4)
    assert checker.violation.address == x.data_ptr() + 40
    checker.reset()
    assert checker.violation is None


def test_launches_nest_and_end() -> None:
    x, y = torch.zeros(4), torch.zeros(4)
    checker = launched(("x", x), kernel="outer")
    checker.begin_launch("inner")
    checker.set_arguments([("y", y)])
    with pytest.raises(OutOfBoundsAccess, match="`inner`"):
        checker.check(ACCESS_LOAD, addresses(x, [0]), None, 4)
    checker.end_launch()
    checker.check(ACCESS_LOAD, addresses(x, [0]), None, 4)
    checker.end_launch()
    with pytest.raises(OutOfBoundsAccess):
        checker.check(ACCESS_LOAD, addresses(x, [0]), None, 4)


def test_arg_span_describes_itself() -> None:
    s = ArgSpan("out_ptr", 1000, 1640, (4, 40), "float32")
    assert s.describe() == "`out_ptr` (shape [4, 40], float32, 640 bytes)"


# ------------------------------------------------------------------------ the real interpreter
INTERPRETED = textwrap.dedent('''
    import json, sys
    import torch, triton, triton.language as tl
    from amdkv.verify.interpreter_bounds import InterpreterBoundsChecker

    checker = InterpreterBoundsChecker()
    checker.install()

    @triton.jit
    def rows(x_ptr, out_ptr, N, BLOCK: tl.constexpr, MASK_STORE: tl.constexpr):
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + r * N + cols, mask=cols < N, other=0.0)
        if MASK_STORE:
            tl.store(out_ptr + r * N + cols, x, mask=cols < N)
        else:
            tl.store(out_ptr + r * N + cols, x)

    @triton.jit
    def counter(out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr + offs, 1.0, mask=offs < n)
        tl.atomic_cas(out_ptr + n, 0.0, 1.0)

    results = {}
    def attempt(name, launch):
        checker.reset()
        try:
            launch()
            results[name] = {"raised": None}
        except Exception as exc:
            results[name] = {"raised": type(exc).__name__}
        v = checker.violation
        results[name]["violation"] = None if v is None else {
            "kernel": v.kernel, "access": v.access, "program_id": list(v.program_id),
            "bad": v.bad_lanes, "nearest": v.nearest()[0].name, "message": v.message}

    x = torch.randn(4, 40)
    buf = torch.full((4 * 40 + 64,), 7.0)   # the output, then 64 elements that are not passed
    out = buf[:160].view(4, 40)
    attempt("masked", lambda: rows[(4,)](x, out, 40, BLOCK=64, MASK_STORE=True))
    results["masked"]["equal"] = bool(torch.equal(out, x))
    attempt("overrun", lambda: rows[(4,)](x, out, 40, BLOCK=64, MASK_STORE=False))
    results["overrun"]["after_end_untouched"] = bool((buf[160:] == 7.0).all())
    # row 2's spill into row 3 lies inside `out`: allowed by the definition (padding zeros landed)
    results["overrun"]["row3_spilled"] = bool((out[3, :24] == 0.0).all())
    attempt("atomic", lambda: counter[(1,)](torch.zeros(16), 16, BLOCK=16))
    print(json.dumps(results))
''')


def run_interpreted(script: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_installed_into_the_real_interpreter() -> None:
    pytest.importorskip("triton", reason="needs Triton's interpreter: install triton==3.6.0 (make test does)")
    proc = run_interpreted(INTERPRETED)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["masked"] == {"raised": None, "violation": None, "equal": True}
    over = res["overrun"]
    # the interpreter wraps the checker's exception; the record says what happened
    assert over["raised"] == "InterpreterError"
    v = over["violation"]
    assert v["kernel"] == "rows" and v["access"] == "store" and v["nearest"] == "out_ptr"
    assert v["program_id"] == [3, 0, 0] and v["bad"] == 24     # rows 0-2 spill into the next row: inside
    assert over["after_end_untouched"]                        # refused before the memory was written
    assert over["row3_spilled"]                               # what the definition does not see
    a = res["atomic"]["violation"]
    assert a["access"] == "atomic" and a["bad"] == 1 and "atomic" in a["message"]


@pytest.mark.slow
def test_install_refuses_an_interpreter_without_its_hooks() -> None:
    pytest.importorskip("triton", reason="needs Triton's interpreter: install triton==3.6.0 (make test does)")
    script = textwrap.dedent('''
        import triton.runtime.interpreter as interp
        from amdkv.verify.interpreter_bounds import InterpreterBoundsChecker
        del interp.GridExecutor._init_args_hst
        try:
            InterpreterBoundsChecker().install()
        except RuntimeError as exc:
            print("refused:", exc)
    ''')
    proc = run_interpreted(script)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refused:" in proc.stdout and "GridExecutor._init_args_hst" in proc.stdout
