"""Static AST rules: what they flag, and what legitimate candidates they must leave alone."""

from __future__ import annotations

import pytest

from amdkv.verify.static_checks import check_source, forward_parameters

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
KERNEL = "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    pass\n"


def codes(body: str) -> set[str]:
    return {f.code for f in check_source(HEADER + KERNEL + body)}


def test_clean_candidate_has_no_findings() -> None:
    body = '''
class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n) * 0.1)   # torch ops in __init__ are fine
    def forward(self, x):
        out = torch.empty_like(x)
        k[(1,)](x, BLOCK=128)
        return out.view(-1).reshape(x.shape)
'''
    assert codes(body) == set()


@pytest.mark.parametrize("body,code", [
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n", "torch_fallback"),
    ("import torch.nn.functional as F\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return F.gelu(x)\n", "torch_fallback"),
    ("class ModelNew(nn.Module):\n    def forward(self, x, y):\n        return x @ y\n", "torch_fallback"),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.sum(dim=1)\n", "torch_fallback"),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return nn.Linear(4, 4)(x)\n", "torch_fallback"),
    ("class Model(nn.Module):\n    pass\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return Model()(x)\n", "uses_reference_model"),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            k[(1,)](x, BLOCK=1)\n        except Exception:\n            return x\n", "swallowing_try_except"),
    ("import time\ntime.perf_counter = lambda: 0.0\nclass ModelNew(nn.Module):\n    pass\n", "patches_module"),
    ("torch.allclose = lambda *a, **k: True\nclass ModelNew(nn.Module):\n    pass\n", "patches_module"),
    ("import subprocess\nclass ModelNew(nn.Module):\n    pass\n", "import_not_allowed"),
    ("import numpy as np\nclass ModelNew(nn.Module):\n    pass\n", "import_not_allowed"),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return open('/etc/passwd').read()\n", "file_access"),
    ("class ModelNew(nn.Module):\n    def forward(self, x):\n        return eval('x')\n", "dynamic_code"),
    ("import sys\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return sys.modules\n", "introspection"),
    ("_cache = {}\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        global _cache\n        return x\n", "global_state"),
])
def test_cheats_are_flagged(body: str, code: str) -> None:
    assert code in codes(body)


def test_no_kernel_is_flagged() -> None:
    src = HEADER + "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.clone()\n"
    assert "no_kernel" in {f.code for f in check_source(src)}


def test_comments_and_strings_never_trigger() -> None:
    body = 'class ModelNew(nn.Module):\n    """Uses torch.relu in the docs only."""\n    def forward(self, x):\n        s = "open(eval)"  # torch.matmul(x, x)\n        k[(1,)](x, BLOCK=1)\n        return x\n'
    assert codes(body) == set()


def test_narrow_try_except_and_import_time_try_are_fine() -> None:
    body = '''
try:
    import triton.language.extra as extra
except Exception:
    extra = None
_configs = {}
class ModelNew(nn.Module):
    def forward(self, x):
        try:
            cfg = _configs[x.shape[0]]
        except KeyError:
            cfg = 128
        k[(1,)](x, BLOCK=cfg)
        return x
'''
    assert codes(body) == set()


def test_syntax_error_and_signatures() -> None:
    assert [f.code for f in check_source("def f(:\n")] == ["syntax_error"]
    src = HEADER + "class ModelNew(nn.Module):\n    def forward(self, a, b, c=1):\n        pass\n"
    assert forward_parameters(src, "ModelNew") == ["a", "b", "c"]
    assert forward_parameters(src, "Model") is None


# The Triton interpreter copies its module's globals (GridExecutor, _interpreter, np, ...) into every
# module whose kernel it runs; the bounds checker patches some of them (interpreter_bounds.py).
FORWARD = "class ModelNew(nn.Module):\n    def forward(self, x):\n        k[(1,)](x, BLOCK=1)\n"


@pytest.mark.parametrize("body", [
    FORWARD + "        GridExecutor._init_args_hst = None\n        return x\n",
    FORWARD + "        return np.maximum(x, 0)\n",
    FORWARD + "        return _interpreter.store\n",
    FORWARD + "        return tl.standard.interpreter_builder\n",          # leaked into triton's own modules
    FORWARD + "        return getattr(tl.standard, 'GridExecutor')\n",
    "if False:\n    np = None\n" + FORWARD + "        return np\n",     # may never run: the leaked np fills it
    "def helper():\n    np = 1\n" + FORWARD + "        return np\n",     # a local elsewhere binds nothing here
    "class Holder:\n    np = 1\n    def get(self):\n        return np\n" + FORWARD,  # class names are not seen by methods
    "def bind():\n    global np\n    np = 1\n" + FORWARD + "        return np\n",
    "np = 1\ndel np\n" + FORWARD,
    "import triton.runtime.interpreter as interp\n" + FORWARD,
    "from triton.runtime.interpreter import GridExecutor\n" + FORWARD,
    "from triton._C.libtriton import interpreter\n" + FORWARD,
    FORWARD + "        return triton.runtime.interpreter.InterpretedFunction\n",
])
def test_interpreter_internals_are_refused(body: str) -> None:
    assert "import_not_allowed" in codes(body)


@pytest.mark.parametrize("body", [
    "np = None\n" + FORWARD + "        return np\n",                     # the candidate's own global
    FORWARD + "        np = x\n        return np\n",                    # a local
    FORWARD + "        return [np for np in (x,)][0]\n",
    FORWARD + "        return (lambda T: T)(x)\n",
    "@triton.jit\ndef k2(x_ptr, T, BLOCK: tl.constexpr):\n    t = T + 1\n" + FORWARD + "        return x.T\n",
    FORWARD + "        return tl.math\n",                               # names it imported from allowed modules
    "from triton.tools.tensor_descriptor import TensorDescriptor\n" + FORWARD + "        return TensorDescriptor\n",
])
def test_own_names_that_collide_with_interpreter_globals_are_fine(body: str) -> None:
    assert codes(body) == set()


@pytest.mark.parametrize("body", [
    # `return` in `finally` discards an exception in flight, like `except: pass`
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            k[(1,)](x, BLOCK=1)\n"
    "        finally:\n            return x\n",
    # ... and so does `break`/`continue` leaving a loop from inside `finally`
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        for _ in range(1):\n            try:\n"
    "                k[(1,)](x, BLOCK=1)\n            finally:\n                break\n        return x\n",
    # contextlib.suppress of a broad exception is a try/except in disguise
    "import contextlib\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        with contextlib.suppress(Exception):\n            k[(1,)](x, BLOCK=1)\n        return x\n",
])
def test_other_ways_of_swallowing_kernel_failures_are_refused(body: str) -> None:
    assert "swallowing_try_except" in codes(body)


def test_finally_that_cleans_up_and_narrow_suppress_are_fine() -> None:
    body = ("import contextlib\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n"
            "            k[(1,)](x, BLOCK=1)\n        finally:\n            for _ in range(2):\n                continue\n"
            "        with contextlib.suppress(KeyError):\n            {}['a']\n        return x\n")
    assert "swallowing_try_except" not in codes(body)


def test_a_retry_with_a_smaller_launch_on_out_of_resources_is_not_a_fallback() -> None:
    """Triton's own pattern (TritonBench-G's attention_fwd_triton3): catch only OutOfResources and
    launch again with smaller blocks. Catching it to return something else, or catching more, is refused."""
    head = "import triton\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        try:\n            k[(1,)](x, BLOCK=64)\n"
    retry = head + "        except triton.OutOfResources:\n            k[(2,)](x, BLOCK=32)\n        return x\n"
    assert "swallowing_try_except" not in codes(retry)
    give_up = head + "        except triton.OutOfResources:\n            return x\n        return x\n"
    broader = head + "        except (triton.OutOfResources, RuntimeError):\n            k[(2,)](x, BLOCK=32)\n        return x\n"
    assert "swallowing_try_except" in codes(give_up) and "swallowing_try_except" in codes(broader)
