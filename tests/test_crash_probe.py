"""benchmarks/crash_probe.py reads crashed reference attempts out of an eval's stderr; the GPU run's
conclusion (which setting stops the SIGSEGVs) rests on these counts, so the parsing is checked on a
stderr shaped like the H200's (the probe itself needs a GPU and GEAK-eval's checkout)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import crash_probe  # noqa: E402

GC_CRASH = """amdkv: attempt 1 of 3 (auto start): the reference for task t1 failed (rc -11, no report): Fatal Python error: Segmentation fault

Current thread 0x00007f9f36157140 (most recent call first):
  Garbage-collecting
  File "<frozen importlib._bootstrap>", line 488 in _call_with_frames_removed

Extension modules: numpy._core._multiarray_umath, torch._C, cuda_utils (total: 3)
"""
HANDLES_CRASH = """amdkv: attempt 2 of 3 (exec'd): the reference for task t1 failed (rc -11, no report): Fatal Python error: Segmentation fault

Current thread 0x00007f19174f9140 (most recent call first):
  File "/x/triton/compiler/compiler.py", line 465 in _init_handles
  File "/x/triton/compiler/compiler.py", line 482 in launch_metadata

Extension modules: torch._C, cuda_utils, __triton_launcher (total: 3)
"""


def test_counts_attempts_and_where_each_died():
    counts = crash_probe.crash_counts("progress...\n" + GC_CRASH + HANDLES_CRASH + HANDLES_CRASH)
    assert counts["attempt 1 (auto start)"] == 1
    assert counts["attempt 2 (exec'd)"] == 2
    assert counts["died_garbage_collecting"] == 1
    assert counts["died_in_init_handles"] == 2
    assert counts["stacks_with_triton_launcher_loaded"] == 2


def test_a_clean_run_counts_nothing_and_every_variant_changes_a_real_setting():
    counts = crash_probe.crash_counts("eval on cuda: 100%|##########| 31/31 [00:46<00:00, pass=9/31]\n")
    assert counts == {"died_garbage_collecting": 0, "died_in_init_handles": 0, "stacks_with_triton_launcher_loaded": 0}
    from amdkv.config import settings_table

    known = {row["env"] for row in settings_table()}
    for name, env in crash_probe.VARIANTS.items():
        assert set(env) <= known, f"variant {name} sets a variable amdkv does not read: {set(env) - known}"


def test_stub_comparison_says_when_no_helper_can_be_built(tmp_path, monkeypatch):
    """Where no libcuda exists (this machine) there is nothing to compare, and the record says so
    instead of failing the probe; the parent's compiler environment is recorded either way."""
    from amdkv.verify import triton_stubs

    monkeypatch.setattr(triton_stubs, "cuda_driver_stub", lambda root: None)
    monkeypatch.setenv("LIBRARY_PATH", "/opt/example/stubs")
    got = crash_probe.stub_comparison(tmp_path)
    assert got["seeded"] is None and "no libcuda" in got["note"]
    assert got["parent_env"]["LIBRARY_PATH"] == "/opt/example/stubs"
