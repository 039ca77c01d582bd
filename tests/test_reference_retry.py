"""A reference worker killed by a signal is retried once in a fresh worker (references are trusted
code: a signal is the machine's failure). Found on the H200 (session 8): a cold reference worker died
with SIGSEGV in 1-2 of 12 tasks under the sandbox, and every candidate of that task became
`infra_error`. Real verifier, real workers, real sandbox (cpu platform); the task kills its own
reference worker with SIGSEGV, once or every time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.verify import Candidate, Verifier

CRASH = '''
import os as _os, signal as _signal
_cache = _os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
if _cache.endswith("compile-cache/inductor"):  # only in a reference worker (its shared compile cache)
    _marker = _os.path.join(_cache, "crashed-once")
    if MODE == "always" or not _os.path.exists(_marker):
        open(_marker, "w").close()
        _os.kill(_os.getpid(), _signal.SIGSEGV)
'''


def crashing_task(tmp_path: Path, mode: str) -> Path:
    text = task_path("l1_relu").read_text()
    head, sep, rest = text.partition("\nMETADATA = ")
    path = tmp_path / f"relu_crash_{mode}.py"
    path.write_text(f'{head}\nMODE = "{mode}"\n{CRASH}{sep}{rest}')
    return path


@pytest.mark.parametrize("mode", ["once", "always"])
def test_a_reference_worker_killed_by_a_signal_is_retried_once(tmp_path, monkeypatch, capfd, mode):
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    task = crashing_task(tmp_path, mode)
    with Verifier("cpu", jobs=1, spares=1, verdict_cache=False, compile_baseline=False) as verifier:
        verdict = verifier.verify(task, Candidate(solution_path("l1_relu", "triton").read_text()))
    err = capfd.readouterr().err
    assert "retrying once in a fresh worker" in err and "rc -11" in err, err[-2000:]
    if mode == "once":
        assert verdict.status == "ok", verdict.diagnostics[-2000:]
    else:
        assert verdict.status == "infra_error", verdict.to_dict()
        assert "a second worker" in verdict.diagnostics and "the first" in verdict.diagnostics
    leftovers = [p for p in (tmp_path / "cache").rglob("tmp*") if p.is_dir() and "refs" in str(p)]
    assert not leftovers, f"a failed reference run left its scratch folders: {leftovers}"
