"""A nearly full disk is infra_error with a message naming the folder, never a short write blamed on
the task or the candidate (amdkv.verify.disk_space; the H200 KernelBench run of 2026-12-02 filled
its 64 GiB disk with reference outputs). No disk is filled here: the threshold is raised above the
real free space, so the real check (statvfs of the real folders) fires."""

from __future__ import annotations

import shutil

import pytest

from amdkv.errors import InfrastructureError
from amdkv.tasks.builtin import solution_path, task_path
from amdkv.tasks.loader import load_task
from amdkv.verify import Candidate, Verifier
from amdkv.verify.disk_space import low_disk, verifier_paths
from amdkv.verify.references import ReferenceFailed

MORE_THAN_ANY_DISK_GIB = 1e9


def test_low_disk_names_the_folder_and_is_silent_with_room(tmp_path):
    free_gib = shutil.disk_usage(tmp_path).free / 2**30
    assert low_disk([tmp_path], free_gib / 2) is None
    assert low_disk([tmp_path], 0) is None  # 0: the check is off
    message = low_disk([tmp_path / "not" / "made" / "yet"], MORE_THAN_ANY_DISK_GIB)
    assert message and str(tmp_path) in message and "GiB free" in message


def test_a_verification_on_a_nearly_full_disk_is_infra_error(tmp_path, monkeypatch):
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task = load_task(task_path("l1_relu"))
    candidate = Candidate(solution_path("l1_relu", "triton").read_text())
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False,
                  min_free_disk_gib=MORE_THAN_ANY_DISK_GIB) as verifier:
        verdict = verifier.verify(task, candidate)
    assert verdict.status == "infra_error" and verdict.reason == "harness_failure", verdict.to_dict()
    assert "disk nearly full" in verdict.diagnostics and "AMDKV_MIN_FREE_DISK_GIB" in verdict.diagnostics
    assert not (tmp_path / "cache" / "refs").exists() or not any((tmp_path / "cache" / "refs").iterdir())


def test_the_paths_checked_are_the_cache_and_the_temp_folder(tmp_path):
    paths = [str(p) for p in verifier_paths(tmp_path)]
    assert paths[0] == str(tmp_path) and len(paths) == 2


def test_a_reference_failure_on_a_nearly_full_disk_is_not_the_tasks(tmp_path, monkeypatch):
    """A reference that failed while the disk was nearly full becomes InfrastructureError (infra_error,
    not remembered as the task's failure, not `unverifiable`), keeping the reference's own error."""
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    with Verifier("cpu", jobs=1, verdict_cache=False, min_free_disk_gib=MORE_THAN_ANY_DISK_GIB) as verifier:
        with pytest.raises(InfrastructureError) as caught:
            verifier._check_disk(ReferenceFailed("torch.save: unexpected pos 832 vs 726"))
    assert not isinstance(caught.value, ReferenceFailed)
    assert "disk nearly full" in str(caught.value) and "unexpected pos 832" in str(caught.value)
    with Verifier("cpu", jobs=1, verdict_cache=False, min_free_disk_gib=0) as verifier:
        verifier._check_disk(ReferenceFailed("x"))  # the check off: nothing raised


# ------------------------------------------------------------------------------ the file-size limit
BIG_OUTPUT_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(262144)]


def get_init_inputs():
    return []
'''

BIG_OUTPUT_CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        double[(triton.cdiv(x.numel(), 65536),)](x, y, x.numel(), BLOCK=65536)
        return y
'''


def test_a_write_past_the_file_size_limit_says_so(tmp_path):
    """torch reports a write past RLIMIT_FSIZE as "unexpected pos N vs M", the same words as a full
    disk (KernelBench's three references with >4 GiB outputs failed so on the H200 in two sessions,
    blamed on the disk): the error now names the limit. A real limit, in a process of its own."""
    import subprocess
    import sys

    code = ("import resource, torch\n"
            "from amdkv.verify.worker_jobs import save_for_parent\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))\n"
            f"save_for_parent({{'x': torch.zeros(1 << 19)}}, {str(tmp_path / 'out.pt')!r})\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "OutputWriteError" in proc.stderr and "unexpected pos" in proc.stderr
    assert "needs about 2.0 MiB and the worker's file-size limit is 1.0 MiB" in proc.stderr and "AMDKV_SANDBOX_FILE_SIZE_GIB" in proc.stderr


def _verify_under_a_small_file_limit(tmp_path, monkeypatch, candidate: str):
    """One verification of BIG_OUTPUT_TASK under a real OS-sandbox file limit of 0.5 MiB, less than one
    of its output files (skipped where RLIMIT_FSIZE cannot be applied: the limit is never stood in)."""
    from amdkv.verify.os_sandbox import probe

    if "resource_limits" not in probe().get("applied", []):
        pytest.skip("the OS sandbox's resource limits (RLIMIT_FSIZE) cannot be applied on this machine, so no "
                    "worker write can be limited here (os_sandbox.probe() lists what applies)")
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    task_file = tmp_path / "big_output.py"
    task_file.write_text(BIG_OUTPUT_TASK)
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, trials=1,
                  sandbox_file_size_gib=0.0005) as verifier:
        verdict = verifier.verify(load_task(task_file), Candidate(candidate))
    assert any((tmp_path / "cache" / "refs").rglob("expected.pt"))  # the reference (trusted) wrote its outputs
    return verdict


def test_a_candidate_gets_the_file_limit_its_tasks_outputs_need(tmp_path, monkeypatch):
    """A correct kernel is judged on its outputs however large the task makes them: its worker is
    started with the file limit its references' files call for (disk_admission.candidate_file_need),
    not the configured one (ROCmBench's rmsnorm_fwd writes 8.5 GiB per call and was infra_error under
    the 4-GiB default on the H100, 2026-12-06; before the fix this was infra_error here too)."""
    verdict = _verify_under_a_small_file_limit(tmp_path, monkeypatch, BIG_OUTPUT_CANDIDATE)
    assert verdict.status == "ok", verdict.to_dict()
    # the outputs' files (~2 MiB) plus the 64-MiB margin: raised, and only that far
    assert 0.0625 < verdict.timings["file_limit_gib"] < 0.07, verdict.timings


def test_a_candidate_writing_far_more_than_its_task_needs_is_still_limited(tmp_path, monkeypatch):
    """The raised limit still binds: a candidate whose outputs are 100 times its task's (here 100 MiB,
    past the need and its margin) fails the write. That limit held every correct output of the task, so
    the outputs are wrong: `mismatch`/`outputs_too_large`, naming the limit, never an `infra_error` that a
    reward could treat as "try again" (it was `infra_error` before session 22)."""
    candidate = BIG_OUTPUT_CANDIDATE.replace("        return y\n", "        return torch.cat([y] * 100)\n")
    assert candidate != BIG_OUTPUT_CANDIDATE
    verdict = _verify_under_a_small_file_limit(tmp_path, monkeypatch, candidate)
    assert (verdict.status, verdict.reason, verdict.compiled) == ("mismatch", "outputs_too_large", True), \
        verdict.to_dict()
    assert "reference outputs" not in verdict.diagnostics  # the candidate's write failed, not the reference's
    assert "the worker's file-size limit" in verdict.diagnostics and "AMDKV_SANDBOX_FILE_SIZE_GIB" in verdict.diagnostics


def test_outputs_too_large_is_blamed_only_where_dtypes_are_enforced():
    """The file-need bound assumes the reference's dtypes: under a benchmark rule that accepts another
    dtype (KernelBench's and TritonBench-G's `check_dtype: False`) a correct output may be larger, so a
    write past the limit stays the machine's there. No worker: the rule is the judge's."""
    import dataclasses

    task = load_task(task_path("l1_relu"))
    loose = dataclasses.replace(task, metadata={**task.metadata, "benchmark_rule": {"kind": "allclose",
                                                                                  "check_dtype": False}})
    strict_rule = dataclasses.replace(task, metadata={**task.metadata, "benchmark_rule": {"kind": "allclose",
                                                                                        "check_dtype": True}})
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="benchmark") as benchmark, \
            Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False) as strict:
        assert not benchmark._dtypes_enforced(loose) and benchmark._dtypes_enforced(strict_rule)
        assert benchmark._dtypes_enforced(task)  # no rule: the tolerance policy, which checks dtypes
        assert strict._dtypes_enforced(loose)  # the rule applies under the benchmark policy only
