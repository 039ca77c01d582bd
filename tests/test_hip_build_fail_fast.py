"""A HIP build scheme that is not the last stops at its first failing unit (issue 20: a candidate that
does not compile waits less for its `compile_error`), and the last scheme still reports every unit.

Real processes throughout: `run_process` on `sleep`, and `compile_units` with a stand-in compiler (a
shell script in the place of hipcc) so that which unit fails, and when, is under the test's control.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from amdkv.process import run_process
from amdkv.verify.backends import hip_build, hip_toolchain
from amdkv.verify.backends.hip_units import Unit
from tests.test_hip_build_split import FAKE_CUDA, KERNEL, _FakeBuild, _kb_capture

# A compiler stand-in: a unit whose text holds FAIL fails at once, one that holds SLOW compiles for
# 20 s, any other at once; each writes its name to `ran` when it finishes.
FAKE_COMPILER = """#!/bin/sh
while [ "$1" != "-c" ]; do shift; done
src="$2"
if grep -q FAIL "$src"; then echo "$src: error: planted" >&2; exit 1; fi
if grep -q SLOW "$src"; then sleep 20; fi
echo "$src" >> "$(dirname "$src")/ran"
exit 0
"""


@pytest.fixture()
def fake_hipcc(tmp_path: Path) -> hip_toolchain.BuildToolchain:
    script = tmp_path / "hipcc"
    script.write_text(FAKE_COMPILER)
    script.chmod(0o755)
    return hip_toolchain.BuildToolchain("rocm", str(script), "HIP version: stand-in", "gfx942", str(tmp_path))


def test_run_process_stops_when_cancelled() -> None:
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t = time.monotonic()
    r = run_process(["sleep", "30"], timeout=60, cancel=cancel)
    assert time.monotonic() - t < 5
    assert r.cancelled and not r.timed_out and r.returncode != 0


def test_run_process_with_cancel_keeps_output_and_timeout() -> None:
    r = run_process(["sh", "-c", "sleep 0.3; echo out; echo err >&2"], timeout=30, cancel=threading.Event())
    assert (r.returncode, r.stdout, r.stderr, r.cancelled) == (0, "out\n", "err\n", False)
    r = run_process(["sh", "-c", "cat"], timeout=30, cancel=threading.Event(), stdin_text="in")
    assert r.stdout == "in"
    t = time.monotonic()
    r = run_process(["sleep", "30"], timeout=0.5, cancel=threading.Event())
    assert r.timed_out and not r.cancelled and time.monotonic() - t < 5


def _units() -> list[Unit]:
    return [Unit("bad.hip", "FAIL", []), Unit("slow.hip", "SLOW", [])]


def test_fail_fast_stops_the_other_units(tmp_path: Path, fake_hipcc: hip_toolchain.BuildToolchain) -> None:
    work = tmp_path / "w"
    work.mkdir()
    t = time.monotonic()
    out, timed_out = hip_build.compile_units(_units(), fake_hipcc, work, "m", timeout=60, jobs=2, fail_fast=True)
    assert time.monotonic() - t < 10  # the slow unit (20 s) was stopped
    errors = dict(out)
    assert "planted" in errors["bad.hip"] and not timed_out
    assert "stopped unfinished: unit bad.hip failed first" in errors["slow.hip"]
    assert not (work / "ran").exists()


def test_fail_fast_never_starts_a_queued_unit(tmp_path: Path, fake_hipcc: hip_toolchain.BuildToolchain) -> None:
    work = tmp_path / "w"
    work.mkdir()
    units = [Unit("bad.hip", "FAIL", []), Unit("ok.hip", "fine", [])]
    out, _ = hip_build.compile_units(units, fake_hipcc, work, "m", timeout=60, jobs=1, fail_fast=True)
    assert "stopped unfinished" in dict(out)["ok.hip"] and not (work / "ran").exists()


def test_last_scheme_runs_every_unit(tmp_path: Path, fake_hipcc: hip_toolchain.BuildToolchain) -> None:
    """Without fail_fast (the scheme whose error is the verdict's) every unit finishes and every
    failing unit has its own message."""
    work = tmp_path / "w"
    work.mkdir()
    units = [Unit("bad.hip", "FAIL", []), Unit("bad2.hip", "FAIL 2", []), Unit("ok.hip", "fine", [])]
    out, _ = hip_build.compile_units(units, fake_hipcc, work, "m", timeout=60, jobs=1)
    errors = dict(out)
    assert "bad.hip: error: planted" in errors["bad.hip"] and "bad2.hip: error: planted" in errors["bad2.hip"]
    assert errors["ok.hip"] is None and (work / "ran").read_text().strip().endswith("ok.hip")


def test_build_capture_fails_fast_only_before_the_last_scheme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBuild(host_fails=True)
    seen: list[tuple[list[str], bool]] = []

    def compile_units(units, tc, workdir, module, **kw):  # noqa: ANN001, ANN202
        seen.append(([u.name for u in units], kw["fail_fast"]))
        return fake.compile_units(units, tc, workdir, module, **kw)

    monkeypatch.setattr(hip_build, "compile_units", compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    res = hip_build.build_capture(_kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }"), FAKE_CUDA,
                                  cache_dir=tmp_path)
    assert res.scheme == "full"
    assert seen == [(["main.cu", "binding.cpp"], True), (["main.cu"], False)]


# ------------------------------------------------------------------ speculative full build
class _TimedSchemes:
    """A `_build_units` stand-in: each scheme takes `seconds[scheme]` and builds when in `ok`; the
    full build waits on its cancel event like a compile being killed."""

    def __init__(self, seconds: dict[str, float], ok: set[str]) -> None:
        self.seconds, self.ok, self.started, self.cancelled = seconds, ok, {}, []
        self.t0 = time.monotonic()

    def __call__(self, units, scheme, tc, name, cache, *, timeout, jobs, t0, last, cancel=None):  # noqa: ANN001, ANN204
        self.started[scheme] = time.monotonic() - self.t0
        if cancel is not None and cancel.wait(self.seconds[scheme]):
            self.cancelled.append(scheme)
            return hip_build.BuildResult(name, False, None, None, "cancelled", 0.0, False, "", "", False, scheme)
        if cancel is None:
            time.sleep(self.seconds[scheme])
        ok = scheme in self.ok
        return hip_build.BuildResult(name, ok, "/x.so" if ok else None, "m" if ok else None,
                                     None if ok else f"{scheme} error", 0.0, False, "", "", False, scheme)


CAPTURE = _kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }")


@pytest.mark.parametrize("ok", [set(), {"full"}, {"split", "full"}])
def test_speculative_full_gives_the_sequential_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     ok: set[str]) -> None:
    answers = []
    for speculative in (False, True):
        fake = _TimedSchemes({"split": 0.4, "full": 0.6}, ok)
        monkeypatch.setattr(hip_build, "_build_units", fake)
        t = time.monotonic()
        res = hip_build.build_capture(CAPTURE, FAKE_CUDA, cache_dir=tmp_path, speculative=speculative)
        answers.append(((res.ok, res.scheme, res.error, res.fallback_reason), time.monotonic() - t, fake))
    (plain, plain_s, _), (spec, spec_s, fake) = answers
    assert spec == plain  # same answer, same fallback reason
    assert fake.started["full"] < 0.2  # started at once, beside the split
    if "split" in ok:
        assert fake.cancelled == ["full"] and spec_s < 0.55  # stopped when the split built
    else:
        assert fake.cancelled == [] and spec_s < plain_s - 0.25  # the slower of the two, not their sum


def test_speculative_full_waits_for_a_cached_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split already cached answers at once: no full build is started beside it."""
    fake = _TimedSchemes({"split": 0.1, "full": 0.1}, {"split"})
    monkeypatch.setattr(hip_build, "_build_units", fake)
    monkeypatch.setattr(hip_build, "_cached", lambda cache, key, name, t0: hip_build.BuildResult(
        name, True, "/x.so", "m", None, 0.0, True, "", key, False, "split"))
    res = hip_build.build_capture(CAPTURE, FAKE_CUDA, cache_dir=tmp_path, speculative=True)
    assert res.ok and res.cached and fake.started == {}


@pytest.mark.parametrize("ok", [set(), {"full"}, {"split", "full"}, {"lean", "split", "full"}])
def test_a_failed_lean_build_starts_the_full_build_beside_the_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    ok: set[str]) -> None:
    """With the lean scheme first (the default since session 19) and no `speculative`: once the lean
    build fails, the full build runs beside the split one; the answer is the sequential one."""
    assert hip_build._scheme_units(CAPTURE, "cuda", "lean")[0] is not None  # lean can be set up for it
    fake = _TimedSchemes({"lean": 0.2, "split": 0.4, "full": 0.6}, ok)
    monkeypatch.setattr(hip_build, "_build_units", fake)
    t = time.monotonic()
    res = hip_build.build_capture(CAPTURE, FAKE_CUDA, cache_dir=tmp_path, lean=True)
    wall = time.monotonic() - t
    first_ok = next((s for s in ("lean", "split", "full") if s in ok), "full")
    assert (res.ok, res.scheme) == (bool(ok), first_ok)
    if "lean" in ok:
        assert set(fake.started) == {"lean"}  # nothing else was built
        return
    assert "lean build failed" in (res.fallback_reason or "")
    assert abs(fake.started["full"] - fake.started["split"]) < 0.1  # both started when lean failed
    if "split" in ok:
        assert fake.cancelled == ["full"] and wall < 0.75  # stopped when the split built
    else:
        assert "split build failed" in (res.fallback_reason or "")
        assert fake.cancelled == [] and wall < 0.2 + 0.6 + 0.3  # lean, then the slower of split and full


def test_a_lean_scheme_refused_up_front_starts_no_full_build_early(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Lean refused before building (here: a __constant__ variable) is no sign of a compile error:
    split then full, in turn, as before."""
    capture = _kb_capture("__constant__ float scale[4];\n" + KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }")
    assert hip_build._scheme_units(capture, "cuda", "lean")[0] is None
    fake = _TimedSchemes({"lean": 0.2, "split": 0.3, "full": 0.3}, {"full"})
    monkeypatch.setattr(hip_build, "_build_units", fake)
    res = hip_build.build_capture(capture, FAKE_CUDA, cache_dir=tmp_path, lean=True)
    assert res.ok and res.scheme == "full"
    assert fake.started["full"] >= fake.started["split"] + 0.25  # after the split failed, not beside it
