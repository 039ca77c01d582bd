"""Run by tests/test_interpreter_helpers.py: one interpreted launch of a kernel that calls two
@triton.jit helpers (one from a module that also names `triton.language.core`), counting the
interpreter's real `_patch_lang` calls; argv[1] `fast` installs amdkv's skip rule first."""

import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

import helper_mod  # noqa: E402

real_patches = {"n": 0}
real = interpreter._patch_lang


def counting(fn):
    real_patches["n"] += 1
    return real(fn)


interpreter._patch_lang = counting  # the interpreter's own function, counted
if sys.argv[1] == "fast":
    from amdkv.verify import interpreter_helpers

    assert interpreter_helpers.install()  # wraps the counting one: skipped calls are not counted


@triton.jit
def _square(x):
    return x * x


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, _square(x) + helper_mod.cube(x), mask=m)


x = torch.arange(100, dtype=torch.float32) / 10
out = torch.empty_like(x)
_kernel[(triton.cdiv(100, 16),)](x, out, 100, BLOCK=16)
print(json.dumps({"out": out.tolist(), "real_patches": real_patches["n"],
                  "restored": not getattr(tl.load, "__name__", "").startswith("<lambda>")}))
