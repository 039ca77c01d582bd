"""What the reference worker reports per case beside the cached files (worker_protocol.ReferenceCaseReport):
one trial's output bytes (disk admission counts a candidate's checked calls with it) and the wall seconds
of its steps (verdict timings `reference_<step>_s`, only from the verification that computed it). A real
reference worker on `cpu`, the KernelBench fixture (111 float32 outputs)."""

from __future__ import annotations

from pathlib import Path

from amdkv.tasks.suites import load_suite
from amdkv.verify import Candidate, Verifier, disk_admission
from amdkv.verify.reference_cache import CaseFiles
from amdkv.verify.worker_protocol import REFERENCE_PHASES

DATA = Path(__file__).resolve().parent / "data" / "external" / "kernelbench"


def test_the_reference_report_says_its_output_bytes_and_its_steps_seconds(tmp_path, monkeypatch):
    task = load_suite(f"kernelbench:{DATA}?only=1_Tiny_add")[0]
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference", trials=1,
                  min_free_disk_gib=0) as verifier:
        first = verifier.verify(task, Candidate(task.metadata["reference_candidate"]))
        again = verifier.verify(task, Candidate(task.metadata["reference_candidate"] + "\n# again\n"))
    assert first.status == again.status == "ok", (first.status, first.reason, first.diagnostics[:500])
    reports = list((tmp_path / "cache" / "refs").rglob("report.json"))
    assert len(reports) == 1
    report = CaseFiles(reports[0].parent.name, tmp_path / "cache").read_report()
    assert report.output_bytes == 111 * 4
    # a tiny problem's steps take under a millisecond each: their sum is what must be there
    assert set(report.phase_s) == set(REFERENCE_PHASES) and all(v >= 0 for v in report.phase_s.values())
    assert 0 < sum(report.phase_s.values()) <= report.seconds + 0.01
    steps = {k: v for k, v in first.timings.items() if k.startswith("reference_") and k != "reference_s"}
    assert steps == {f"reference_{k}_s": round(v, 3) for k, v in report.phase_s.items()}  # timings keep ms
    assert not any(k.startswith("reference_") and k != "reference_s" for k in again.timings), \
        "a verification that took its reference from the cache reports no reference steps"


def test_an_unreadable_cached_report_is_computed_again(tmp_path, monkeypatch):
    """A report.json this version cannot read (another development version wrote it under the same key)
    is a missing case, not an `infra_error` for every candidate of the task: computed again, replaced."""
    import json

    task = load_suite(f"kernelbench:{DATA}?only=1_Tiny_add")[0]
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference", trials=1,
                  min_free_disk_gib=0) as verifier:
        verifier.verify(task, Candidate(task.metadata["reference_candidate"]))
        (path,) = (tmp_path / "cache" / "refs").rglob("report.json")
        old = json.loads(path.read_text())
        del old["phase_s"]  # what the previous format wrote
        path.write_text(json.dumps(old))
        verdict = verifier.verify(task, Candidate(task.metadata["reference_candidate"] + "\n# again\n"))
    assert verdict.status == "ok", (verdict.status, verdict.reason, verdict.diagnostics[-800:])
    assert "reference_eager_s" in verdict.timings, "the reference was not computed again"
    assert "phase_s" in json.loads(path.read_text())


_MUTATING_TASK = '''
import torch
import torch.nn as nn

METADATA = {"level": 1, "op_family": "elementwise", "dtypes": ["fp32"], "licence": "Apache-2.0",
            "provenance": "original (amdkv tests)"}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2.0)  # in place: the trial's input changes during the eager call
        return x + 1.0


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
'''

_MUTATING_CANDIDATE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2.0)
        return x + 1.0
'''


def test_the_golden_comes_from_the_inputs_as_they_were_before_an_in_place_reference(tmp_path, monkeypatch):
    """The float64 golden is computed from the trial's inputs converted on the device from their clone
    taken before the eager call (session 23; a host copy converted on the host before). A reference that
    changes its input in place must get a golden from the untouched input: from the changed one it would
    be 4x+1 against the eager 2x+1. And the saved trial must be the untouched input: on `cpu` the eager
    call ran on the trial's own tensors, so until session 23 candidates got the changed input and the
    golden was computed from it (this test fails on that code: golden 4x+1, eager 2x+1)."""
    import torch

    from amdkv.tasks.loader import load_task
    from amdkv.verify.judging import load_tensor_file

    path = tmp_path / "mutating.py"
    path.write_text(_MUTATING_TASK)
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference",
                  min_free_disk_gib=0) as verifier:
        verdict = verifier.verify(load_task(path), Candidate(_MUTATING_CANDIDATE))
    assert verdict.status == "ok", (verdict.status, verdict.reason, verdict.diagnostics[-800:])
    (expected_path,) = (tmp_path / "cache" / "refs").rglob("expected.pt")
    expected = load_tensor_file(expected_path)
    eager, golden = expected["eager"][0][0], expected["golden"][0][0]
    assert golden.dtype == torch.float64 and torch.allclose(golden, eager.double(), atol=1e-5)


def test_a_reference_that_wrote_past_its_reservation_says_so(tmp_path, monkeypatch):
    """A reference admitted by its loader's size (`reference_trial_bytes`, KernelBench's meta-device
    sizing) whose files end larger than that (here: torch.save's headers on a 2,220-byte estimate, with
    no slack and no lower bound) gets `reference_disk_over_reservation_mib`; with the defaults (needs under
    256 MiB are not checked) nothing is said. A real reference worker."""
    task = load_suite(f"kernelbench:{DATA}?only=1_Tiny_add")[0]
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(disk_admission.ADMISSION, "root", tmp_path / "ledger")
    candidate = task.metadata["reference_candidate"]
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference", trials=1,
                  min_free_disk_gib=0) as verifier:
        plain = verifier.verify(task, Candidate(candidate))
    assert plain.status == "ok" and "reference_disk_over_reservation_mib" not in plain.timings
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setattr(disk_admission, "CHECK_WRITTEN_ABOVE_BYTES", 0)
    monkeypatch.setattr(disk_admission, "OVER_RESERVATION_SLACK_BYTES", 0)
    with Verifier("cpu", jobs=1, verdict_cache=False, compile_baseline=False, policy="reference", trials=1,
                  min_free_disk_gib=0) as verifier:
        checked = verifier.verify(task, Candidate(candidate + "\n# checked\n"))
    assert checked.status == "ok", (checked.status, checked.reason, checked.diagnostics[-500:])
    assert checked.timings.get("reference_disk_over_reservation_mib", 0) > 0, checked.timings
