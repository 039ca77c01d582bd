"""Scalar kernel arguments as loop bounds under the Triton interpreter, whatever NumPy's version
(amdkv/verify/interpreter_numpy.py).

NumPy 2.4 made `int()` of a one-element array with a dimension an error; NumPy 1.25-2.3 warn about it
(DeprecationWarning "Conversion of an array with ndim > 0 to a scalar"). The tests turn that warning
into an error, so on the NumPy the Makefile installs, and on an older one, they fail exactly where
NumPy 2.4+ fails without the fix. Real Triton interpreter, real kernels in a child process (the
interpreter is chosen at import, by TRITON_INTERPRET)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from amdkv.verify.interpreter_numpy import _scalar_index

NDIM_WARNING = ".*array with ndim > 0 to a scalar.*"


def _tensor(data: np.ndarray) -> SimpleNamespace:
    """What `_scalar_index` reads of a `tl.tensor` under the interpreter: `.handle.data`."""
    return SimpleNamespace(handle=SimpleNamespace(data=data))


def test_the_index_of_a_one_element_array_is_its_element() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=NDIM_WARNING, category=DeprecationWarning)
        assert _scalar_index(_tensor(np.array([7], dtype=np.int32))) == 7
        assert _scalar_index(_tensor(np.array([[3]], dtype=np.int64))) == 3
        assert _scalar_index(_tensor(np.array([2.9], dtype=np.float32))) == 2  # int() truncates, as before
        assert _scalar_index(_tensor(np.array(5))) == 5
    with pytest.raises(TypeError):  # more than one element: an error, as before
        _scalar_index(_tensor(np.array([1, 2])))


KERNEL = textwrap.dedent('''
    import sys
    import warnings

    warnings.filterwarnings("error", message="{ndim}", category=DeprecationWarning)
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    from amdkv.verify import interpreter_numpy

    @triton.jit
    def row_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):  # a scalar argument as the loop bound
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))

    if sys.argv[1] == "install":
        assert interpreter_numpy.install() and not interpreter_numpy.install()  # once only
    x = torch.randn(3, 100)
    out = torch.empty(3)
    row_sum[(3,)](x, out, 100, BLOCK=32)
    torch.testing.assert_close(out, x.sum(-1))
    assert getattr(tl.tensor, "__index__", None) is not interpreter_numpy._scalar_index, "left patched after the launch"
    print("sums ok")
''').replace("{ndim}", NDIM_WARNING)


def _run_kernel(tmp_path, mode: str) -> subprocess.CompletedProcess:
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL)
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=300, env=env)


def test_a_kernel_looping_over_a_scalar_argument_runs_under_the_interpreter(tmp_path) -> None:
    done = _run_kernel(tmp_path, "install")
    assert done.returncode == 0 and "sums ok" in done.stdout, done.stderr[-3000:]


def test_without_the_fix_the_same_kernel_fails_as_numpy_2_4_makes_it(tmp_path) -> None:
    """The control: the kernel above is one the fix is needed for (on this NumPy, with the warning
    as an error, or on NumPy 2.4+ as it is)."""
    done = _run_kernel(tmp_path, "plain")
    # NumPy 1.25-2.3: "Conversion of an array with ndim > 0 to a scalar"; 2.4+: "... converted to Python scalars"
    assert done.returncode != 0 and re.search(r"to (a|Python) scalar", done.stderr), (done.stdout, done.stderr[-3000:])
