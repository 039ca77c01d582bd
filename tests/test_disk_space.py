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
