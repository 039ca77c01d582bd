"""A reference worker killed by a signal is retried in fresh workers started differently
(references.reference_attempts: as configured, exec'd, exec'd without the OS sandbox; references are
trusted code: a signal is the machine's failure). Found on the H200: cold reference workers died
with SIGSEGV under the sandbox (1-2 of 12 tasks in session 8, most TritonBench-G references on
2026-12-02), and every candidate of the task became `infra_error` or `unverifiable`. Real verifier,
real workers, real sandbox (cpu platform); the task kills its own reference worker with SIGSEGV:
once, every time, or whenever it runs under seccomp (the sandbox's filter)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from amdkv.tasks.builtin import solution_path, task_path
from amdkv.verify import Candidate, Verifier, os_sandbox

CRASH = '''
import os as _os, signal as _signal
_cache = _os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
if _cache.endswith("compile-cache/inductor"):  # only in a reference worker (its shared compile cache)
    _marker = _os.path.join(_cache, "crashed-once")
    _seccomp = any(l.split()[1:] != ["0"] for l in open("/proc/self/status") if l.startswith("Seccomp:"))
    if MODE == "always" or (MODE == "sandboxed" and _seccomp) or (MODE == "once" and not _os.path.exists(_marker)):
        open(_marker, "w").close()
        _os.kill(_os.getpid(), _signal.SIGSEGV)
'''


def crashing_task(tmp_path: Path, mode: str) -> Path:
    text = task_path("l1_relu").read_text()
    head, sep, rest = text.partition("\nMETADATA = ")
    path = tmp_path / f"relu_crash_{mode}.py"
    path.write_text(f'{head}\nMODE = "{mode}"\n{CRASH}{sep}{rest}')
    return path


@pytest.mark.parametrize("mode", ["once", "always", "sandboxed"])
def test_a_reference_worker_killed_by_a_signal_is_retried(tmp_path, monkeypatch, capfd, mode):
    if mode == "sandboxed" and "seccomp" not in os_sandbox.capabilities().get("applied", []):
        pytest.skip("this machine's OS sandbox applies no seccomp filter: the task cannot tell it is sandboxed")
    monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    task = crashing_task(tmp_path, mode)
    with Verifier("cpu", jobs=1, spares=1, verdict_cache=False, compile_baseline=False) as verifier:
        verdict = verifier.verify(task, Candidate(solution_path("l1_relu", "triton").read_text()))
    err = capfd.readouterr().err
    assert "retrying in a fresh worker" in err and "rc -11" in err, err[-2000:]
    if mode == "once":
        assert verdict.status == "ok", verdict.diagnostics[-2000:]
        assert "attempt 1 of 3 (auto start)" in err and "attempt 2" not in err
    elif mode == "sandboxed":  # the fork-started and the exec'd worker crash; the unsandboxed one computes it
        assert verdict.status == "ok", verdict.diagnostics[-2000:]
        assert "attempt 2 of 3 (exec'd)" in err and "attempt 3" not in err
    else:
        assert verdict.status == "infra_error", verdict.to_dict()
        for label in ("attempt 1 of 3 (auto start)", "attempt 2 of 3 (exec'd)", "attempt 3 of 3 (exec'd, OS sandbox off)"):
            assert label in verdict.diagnostics, verdict.diagnostics[-3000:]
    leftovers = [p for p in (tmp_path / "cache").rglob("tmp*") if p.is_dir() and "refs" in str(p)]
    assert not leftovers, f"a failed reference run left its scratch folders: {leftovers}"
