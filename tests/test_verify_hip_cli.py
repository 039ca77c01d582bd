"""`amdkv verify TASK HIP_CANDIDATE --device cpu --json`: the compile-only verdict with AMD
resources (real hipcc 7; nothing runs HIP on this machine, so `correct` is null)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from toolchain_support import require_hipcc


REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "amdkv" / "tasks" / "builtin" / "general" / "l1_relu.py"
DATA = REPO / "tests" / "data" / "hip_candidates"


def _need_hipcc7() -> None:
    require_hipcc("gfx942", "gfx950")


def _verify(cand: Path, *args: str) -> tuple[int, dict]:
    out = subprocess.run([sys.executable, "-m", "amdkv.cli", "verify", str(TASK), str(cand), "--device", "cpu",
                          "--json", *args], capture_output=True, text=True, timeout=600)
    return out.returncode, json.loads(out.stdout)


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_compile_only_verdict_with_resources(arch: str) -> None:
    _need_hipcc7()
    rc, v = _verify(DATA / "ok_relu_kb.py", "--arch", arch)
    assert v["language"] == "hip"
    assert v["status"] == "unverifiable" and v["reason"] == "no_hip_runtime"
    assert v["compiled"] is True and v["correct"] is None
    assert arch in v["platform"]
    res = [r for r in v["resources"] if r["arch"] == arch]
    assert res and all(r["compiled"] and r["vgpr"] and r["sgpr"] for r in res)
    assert rc == 1  # not correct (cannot be judged here) -> "failures found"


def test_compile_error_verdict() -> None:
    _need_hipcc7()
    rc, v = _verify(DATA / "err_undeclared_kb.py")
    assert v["status"] == "compile_error" and v["compiled"] is False and rc == 1
    assert "undeclared identifier" in v["diagnostics"]
