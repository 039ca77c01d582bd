"""amdkv/verify/interpreter_helpers.py: under the Triton interpreter a @triton.jit helper called
from a kernel re-patches triton.language in every program instance; amdkv skips that when the
running launch already patched the modules the helper names. Same outputs, fewer patches, and a
helper whose module names another language module is still patched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "data" / "interpreter_helpers"


def _probe(mode: str) -> dict:
    pytest.importorskip("triton", reason="the interpreter is Triton's")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(PROBE)])}
    proc = subprocess.run([sys.executable, str(PROBE / "probe.py"), mode], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_helpers_skip_the_re_patch_with_the_same_results():
    slow, fast = _probe("slow"), _probe("fast")
    assert fast["out"] == slow["out"]
    # 7 program instances: the launch's patch + one per call of each helper ...
    assert slow["real_patches"] == 1 + 7 + 7
    # ... and with the skip rule the launch's patch + the first call of the helper whose module
    # also names tl.core (a module the launch had not patched yet; Triton leaves it patched)
    assert fast["real_patches"] == 1 + 1
    assert slow["restored"] and fast["restored"]  # the language is unpatched after the launch


def test_install_is_idempotent():
    pytest.importorskip("triton", reason="the interpreter is Triton's")
    code = ("from amdkv.verify import interpreter_helpers as h; "
            "print(h.install(), h.install())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)})
    assert proc.stdout.split() == ["True", "False"], proc.stderr[-2000:]
