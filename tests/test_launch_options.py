"""AMD-only Triton launch options dropped on NVIDIA (amdkv/verify/launch_options.py).

No GPU here: the wrapper is installed on a stand-in class with Triton's `run` calling convention; what
it passes on is what NVIDIA's Triton would receive. The option names come from the installed Triton's
real AMD and NVIDIA backends."""
from __future__ import annotations

from amdkv.verify.launch_options import drop_amd_options_on_nvidia, foreign_options


class FakeJIT:
    """Stands in for triton.runtime.jit.JITFunction: records what `run` receives."""

    def __init__(self, arg_names: list[str]) -> None:
        self.arg_names = arg_names
        self.received: dict | None = None

    def run(self, *args, grid=None, warmup=False, **kwargs):
        self.received = {"args": args, "grid": grid, "warmup": warmup, **kwargs}
        return "launched"


def fresh_jit_class() -> type:
    """A FakeJIT subclass of its own per test: installing the wrapper patches the class."""
    return type("JIT", (FakeJIT,), {})


def test_the_options_are_amds_own() -> None:
    names = foreign_options()
    assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= names
    assert not names & {"num_warps", "num_stages", "num_ctas", "debug", "enable_fp_fusion"}


def test_dropped_on_nvidia_but_not_a_kernel_parameter_of_that_name() -> None:
    JIT = fresh_jit_class()  # noqa: N806 - a class
    assert drop_amd_options_on_nvidia("cuda:0", target=JIT)
    assert drop_amd_options_on_nvidia("cuda:0", target=JIT)  # idempotent: one wrapper
    assert not hasattr(JIT.run.__wrapped__, "__wrapped__")
    gemm = JIT(["a_ptr", "BLOCK"])
    assert gemm.run(1, 2, grid=(1,), BLOCK=16, num_warps=8, waves_per_eu=2, kpack=2, matrix_instr_nonkdim=16) == "launched"
    assert gemm.received == {"args": (1, 2), "grid": (1,), "warmup": False, "BLOCK": 16, "num_warps": 8}
    odd = JIT(["x_ptr", "kpack"])  # a kernel whose own parameter is called kpack keeps it
    odd.run(1, grid=(1,), kpack=4, waves_per_eu=1)
    assert odd.received["kpack"] == 4 and "waves_per_eu" not in odd.received


def test_left_alone_off_nvidia() -> None:
    JIT = fresh_jit_class()  # noqa: N806 - a class
    original = JIT.run
    assert not drop_amd_options_on_nvidia("cpu", target=JIT)
    assert JIT.run is original
