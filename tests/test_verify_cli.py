"""The `amdkv verify` command-line contract (CPU platform).

- `--json` prints a verdict with (at least) status, reason, compiled, correct, speedup, platform,
  cases, resources, env;
- exit 0 when the candidate is correct, 1 when it is not, 2 on bad input (a missing candidate
  file, a file without `ModelNew`, a `ModelNew.forward` with the wrong number of arguments), with
  a message that names what is wrong;
- a level-1 verify on CPU comes back quickly (about 10 s on the 2-core dev machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the CLI verifies Triton candidates: install triton==3.6.0 (make test does)")

ROOT = Path(__file__).resolve().parent.parent
RELU_TASK = ROOT / "amdkv" / "tasks" / "builtin" / "general" / "l1_relu.py"
RELU_SOLUTION = ROOT / "amdkv" / "tasks" / "builtin" / "solutions" / "triton" / "l1_relu.py"
ADVERSARIAL = ROOT / "tests" / "data" / "adversarial"
JSON_KEYS = {"status", "reason", "compiled", "correct", "speedup", "platform", "cases", "resources", "env"}


def amdkv(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "amdkv.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def verify(task: Path, cand: Path, cwd: Path) -> subprocess.CompletedProcess:
    return amdkv("verify", str(task), str(cand), "--device", "cpu", "--json", cwd=cwd)


def _json(proc: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - reported with the output
        raise AssertionError(f"stdout is not JSON ({exc}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


@pytest.mark.slow
def test_correct_candidate_exit_0_with_json_and_fast(tmp_path):
    t0 = time.monotonic()
    proc = verify(RELU_TASK, RELU_SOLUTION, tmp_path)
    elapsed = time.monotonic() - t0
    print(f"amdkv verify l1_relu on cpu: {elapsed:.1f} s wall (CLI start-up included)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = _json(proc)
    assert JSON_KEYS <= set(verdict), JSON_KEYS - set(verdict)
    assert verdict["status"] == "ok" and verdict["reason"] is None
    assert verdict["compiled"] is True and verdict["correct"] is True
    assert verdict["speedup"] is None  # the CPU platform never reports speedups
    assert verdict["platform"] == "cpu" and verdict["interpreter_verified"] is True
    assert {c["name"] for c in verdict["cases"]} == {"small", "odd"}  # correctness cases only
    assert all(c["status"] == "ok" for c in verdict["cases"])
    assert verdict["resources"] == []
    assert verdict["env"]["torch"] and verdict["env"]["triton"]
    # about 10 s on the 2-core dev machine; generous for a loaded CI runner
    assert elapsed < 30, f"a level-1 verify on CPU took {elapsed:.1f} s"


@pytest.mark.slow
def test_wrong_candidate_exit_1_with_json(tmp_path):
    proc = verify(RELU_TASK, ADVERSARIAL / "wrong_shape.py", tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    verdict = _json(proc)
    assert JSON_KEYS <= set(verdict)
    assert (verdict["status"], verdict["reason"], verdict["correct"]) == ("mismatch", "wrong_shape", False)


def test_cheating_candidate_exit_1(tmp_path):
    proc = verify(RELU_TASK, ADVERSARIAL / "torch_relu_fallback.py", tmp_path)
    assert proc.returncode == 1, proc.stderr[-3000:]
    verdict = _json(proc)
    assert (verdict["status"], verdict["reason"]) == ("hack_detected", "torch_fallback")
    assert verdict["hack_findings"]


def test_missing_candidate_exit_2(tmp_path):
    missing = tmp_path / "no_such_candidate.py"
    proc = verify(RELU_TASK, missing, tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "no_such_candidate.py" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_candidate_without_model_new_exit_2(tmp_path):
    cand = tmp_path / "not_a_candidate.py"
    cand.write_text(textwrap.dedent("""
        import torch.nn as nn
        import triton


        @triton.jit
        def _k(x_ptr):
            'never launched: the file is refused before it runs'


        class SomethingElse(nn.Module):
            def forward(self, x):
                return x
    """))
    proc = verify(RELU_TASK, cand, tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "ModelNew" in proc.stderr and "not_a_candidate.py" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cached_no_model_new_verdict_names_this_files_path_only(tmp_path, monkeypatch):
    """The verdict cache serves the same source's verdict under another path: the message must name
    the file given now, once, and never the path of whoever verified that source first."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    source = "import torch.nn as nn\n\n\nclass SomethingElse(nn.Module):\n    pass\n"
    first, second = tmp_path / "first_copy.py", tmp_path / "second_copy.py"
    first.write_text(source)
    second.write_text(source)
    for cand in (first, second):
        proc = amdkv("verify", str(RELU_TASK), str(cand), "--device", "cpu", "--verdict-cache", cwd=tmp_path)
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
        assert proc.stderr.count(str(cand)) == 1 and "ModelNew" in proc.stderr, proc.stderr
    assert "first_copy" not in proc.stderr, proc.stderr


def test_forward_with_wrong_arity_exit_2(tmp_path):
    cand = tmp_path / "two_args.py"
    cand.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        import triton
        import triton.language as tl


        @triton.jit
        def _k(x_ptr):
            'never launched: the file is refused before it runs'


        class ModelNew(nn.Module):
            def forward(self, x, y):
                out = torch.empty_like(x)
                _k[(1,)](out)
                return out
    """))
    proc = verify(RELU_TASK, cand, tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    err = proc.stderr
    assert "forward" in err and "2 argument" in err and "takes 1" in err, err
    assert "Traceback" not in err


def test_task_id_instead_of_task_file_exit_2_names_the_file(tmp_path):
    """`amdkv tasks list` shows ids; passing one as TASK_FILE says which file to pass instead."""
    proc = verify(Path("l1_relu"), RELU_SOLUTION, tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert str(RELU_TASK) in proc.stderr and "bundled task" in proc.stderr
    assert "Traceback" not in proc.stderr
    unknown = verify(Path("l1_no_such_task"), RELU_SOLUTION, tmp_path)
    assert unknown.returncode == 2 and "l1_no_such_task" in unknown.stderr and "tasks list" in unknown.stderr


def test_env_names_the_platform_a_default_run_verifies_on(tmp_path):
    """`amdkv env --json` says what `--device auto` (or AMDKV_DEVICE) resolves to on this machine,
    and why not when the asked-for device is absent, so a user knows which platform verdicts name."""
    import os

    got = json.loads(amdkv("env", "--json", cwd=tmp_path).stdout)["platform"]
    assert got["requested"] == "auto" and got["name"] in ("cpu", "cuda", "rocm") and "device" in got
    assert got["amd_target"] is (got["name"] == "rocm")
    import torch

    if not torch.cuda.is_available():
        proc = subprocess.run([sys.executable, "-m", "amdkv.cli", "env", "--json"], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "AMDKV_DEVICE": "cuda"}, timeout=300)
        missing = json.loads(proc.stdout)["platform"]
        assert missing["requested"] == "cuda" and "no GPU" in missing["error"]
