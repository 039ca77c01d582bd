"""The verifier's caller contract (issue 13): source strings and paths, futures from many threads,
the verdict cache and single flight, verdict invariants, light imports, one config.

Everything runs the real verifier on the `cpu` platform (Triton interpreter) against a tiny test
task, so a real run costs about a second here; repeated submissions are served by the cache.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the candidates are Triton programs: install triton==3.6.0 (make test does)")

from amdkv.config import VerifierConfig, settings_table  # noqa: E402
from amdkv.errors import BadInputError  # noqa: E402
from amdkv.tasks.loader import load_task  # noqa: E402
from amdkv.verify import Candidate, Verifier  # noqa: E402
from amdkv.verify.verdict import FAILING, NO_JUDGEMENT, STATUSES, Verdict  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "adversarial"
TASK = DATA / "tasks" / "identity_copy.py"
GOOD = (DATA / "ok_identity_copy.py").read_text()
# Wrong on purpose: adds 1 to every element, so the verdict is a mismatch (distinguishable from ok).
BAD = GOOD.replace("tl.load(x_ptr + offs, mask=mask)", "tl.load(x_ptr + offs, mask=mask) + 1.0")


def variant(source: str, i: int) -> str:
    """A distinct candidate (another sha256) that judges exactly like `source`."""
    return f"# variant {i}\n{source}"


@pytest.fixture(scope="module")
def task():
    return load_task(TASK)


@pytest.fixture()
def cached_verifier(tmp_path):
    """A verifier with its verdict cache on (the test session switches the cache off by default)."""
    with Verifier("cpu", jobs=2, verdict_cache=True, cache_dir=str(tmp_path / "cache"), timeout=120) as v:
        yield v


def test_source_string_and_path_give_identical_verdicts(task, tmp_path):
    for source in (GOOD, BAD):
        path = tmp_path / "cand.py"
        path.write_text(source)
        with Verifier("cpu", spares=0, timeout=120) as v:
            by_path = v.verify(task, str(path))
            by_text = v.verify(task, source=source)
            by_value = v.verify(task, Candidate(source, language="triton"))
        for other in (by_text, by_value):
            assert (other.status, other.reason, other.correct, other.compiled) == \
                   (by_path.status, by_path.reason, by_path.correct, by_path.compiled)
            assert [(c.name, c.status, c.reason, c.max_abs_err) for c in other.cases] == \
                   [(c.name, c.status, c.reason, c.max_abs_err) for c in by_path.cases]
            assert other.candidate_sha256 == by_path.candidate_sha256 == Candidate(source).sha256
    assert by_path.status == "mismatch"  # the last one was BAD: the test can tell the two apart


def test_a_string_that_is_program_text_is_refused_with_a_hint(task):
    with Verifier("cpu", spares=0) as v:
        with pytest.raises(BadInputError, match="source="):
            v.verify(task, GOOD)          # a str is a path; this one is text
        with pytest.raises(BadInputError, match="either"):
            v.submit(task, "x.py", source=GOOD)


def test_200_submissions_from_8_threads_none_lost_or_swapped(task, cached_verifier):
    """8 threads x 25 submissions of 10 distinct candidates (5 right, 5 wrong) through ONE verifier:
    every future resolves, each verdict is the verdict of what that thread sent (its hash and its
    expected status), and each distinct candidate ran once (the rest came from the cache or shared
    an in-flight run)."""
    distinct = [(variant(GOOD, i), "ok") for i in range(5)] + [(variant(BAD, i), "mismatch") for i in range(5)]
    results: list[tuple[str, str, Verdict]] = []
    lock = threading.Lock()

    def caller(t: int) -> None:
        futures: list[tuple[str, str, Future]] = []
        for k in range(25):
            source, expected = distinct[(t * 7 + k) % len(distinct)]
            futures.append((source, expected, cached_verifier.submit(task, Candidate(source))))
        for source, expected, fut in futures:
            verdict = fut.result(timeout=600)
            with lock:
                results.append((source, expected, verdict))

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 200
    for source, expected, verdict in results:
        assert verdict.candidate_sha256 == Candidate(source).sha256
        assert verdict.status == expected, (verdict.status, verdict.reason, verdict.diagnostics[-500:])
    ran = [v for _, _, v in results if not v.cache_hit]
    assert len(ran) == len(distinct)  # one real run per distinct candidate
    assert {v.candidate_sha256 for v in ran} == {Candidate(s).sha256 for s, _ in distinct}


def test_cache_hits_are_marked_and_keyed_by_settings(task, tmp_path):
    cache = str(tmp_path / "cache")
    with Verifier("cpu", spares=0, verdict_cache=True, cache_dir=cache) as v:
        first = v.verify(task, source=GOOD)
        again = v.verify(task, source=GOOD)
    assert not first.cache_hit and again.cache_hit and again.cache_key == first.cache_key
    assert again.status == first.status == "ok" and again.candidate_sha256 == first.candidate_sha256
    # a setting that can change a verdict (trials) is part of the key: a miss, a real run
    with Verifier("cpu", spares=0, verdict_cache=True, cache_dir=cache, trials=2) as v:
        other = v.verify(task, source=GOOD)
    assert not other.cache_hit and other.cache_key != first.cache_key
    # a setting that only changes speed (spare_start) is not
    with Verifier("cpu", spares=0, verdict_cache=True, cache_dir=cache, spare_start="exec") as v:
        assert v.verify(task, source=GOOD).cache_hit


def test_infra_errors_are_never_cached(task, tmp_path):
    from amdkv.verify.verdict_cache import VerdictCache

    cache = VerdictCache(tmp_path)
    cache.put("k" * 64, Verdict(status="infra_error", reason="harness_failure"))
    assert cache.get("k" * 64) is None
    cache.put("j" * 64, Verdict(status="ok", correct=True, compiled=True))
    assert cache.get("j" * 64).cache_hit
    (tmp_path / "jj" / ("j" * 64 + ".json")).write_text("{not json")  # corrupt: a miss, not an error
    assert cache.get("j" * 64) is None


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("platform", ["cpu", "cuda", "rocm", "static:gfx942"])
def test_verdict_invariants_over_every_status(status, platform):
    """Whatever a code path left in `correct`/`compiled`, enforce_invariants makes them agree with
    the status (the verifier calls it on every verdict it returns)."""
    for correct in (True, False, None):
        for compiled in (True, False, None):
            v = Verdict(status=status, platform=platform, correct=correct, compiled=compiled,
                        interpreter_verified=True).enforce_invariants()
            if status == "ok":
                assert v.correct is True and v.compiled is True
            elif status in FAILING:
                assert v.correct is False
            else:
                assert status in NO_JUDGEMENT and v.correct is None
            if status == "compile_error":
                assert v.compiled is False
            else:  # None stays None: only a path that compiled may say so
                assert v.compiled == (True if status == "ok" else compiled)
            assert v.interpreter_verified == (status == "ok")


def test_compile_only_hip_compile_error_is_incorrect():
    """The compile-only HIP path (no AMD GPU) used to leave `correct: null` on a compile_error."""
    from amdkv.verify.backends.hip import _verdict

    fields = _verdict("compile_error", "hipcc_error", ["gfx942"], compiled=False)
    v = Verdict(**{k: val for k, val in fields.items() if k in Verdict.__dataclass_fields__}).enforce_invariants()
    assert v.correct is False and v.compiled is False


def test_light_imports_pull_in_neither_torch_nor_triton():
    code = ("import sys, amdkv, amdkv.tasks, amdkv.metrics, amdkv.config, amdkv.verify.verdict\n"
            "from amdkv.verify import Verdict, Candidate, VerifierConfig, STATUSES, BaseVerifier\n"
            "from amdkv.tasks.types import Task\n"
            "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert not {m for m in imported if m.split(".")[0] in ("torch", "triton")}


def test_config_from_env_parses_every_setting_and_names_bad_values():
    env = {"AMDKV_DEVICE": "CPU", "AMDKV_GPUS": "0,2", "AMDKV_JOBS": "4", "AMDKV_TRIALS": "2",
           "AMDKV_TIMEOUT": "30.5", "AMDKV_ARCHS": "gfx942, gfx950", "AMDKV_VERDICT_CACHE": "off",
           "AMDKV_SMALL_KERNEL_MS": "0.2", "AMDKV_WORKER_THREADS": "2"}
    c = VerifierConfig.from_env(env, jobs=8)
    assert (c.device, c.gpus, c.jobs, c.trials, c.timeout, c.archs, c.verdict_cache, c.small_kernel_ms,
            c.worker_threads) == ("cpu", (0, 2), 8, 2, 30.5, ("gfx942", "gfx950"), False, 0.2, 2)
    assert VerifierConfig.from_env({"AMDKV_GPUS": "3"}).gpus == 3
    for var, bad in (("AMDKV_TRIALS", "three"), ("AMDKV_VERDICT_CACHE", "maybe"), ("AMDKV_DEVICE", "tpu"),
                     ("AMDKV_TIMING_METHOD", "stopwatch"), ("AMDKV_JOBS", "0")):
        with pytest.raises(BadInputError) as err:
            VerifierConfig.from_env({var: bad})
        assert bad in str(err.value) or var.lower().removeprefix("amdkv_") in str(err.value)
    with pytest.raises(BadInputError, match="unknown verifier setting"):
        VerifierConfig.from_env({}, trails=3)
    # only verdict-affecting settings are in the cache key
    assert "trials" in c.verdict_settings() and "jobs" not in c.verdict_settings()


def test_every_setting_is_in_the_docs_table():
    docs = (ROOT / "docs" / "verifier.md").read_text()
    missing = [row["env"] for row in settings_table() if row["env"] and f"`{row['env']}`" not in docs]
    assert not missing, f"docs/verifier.md's settings table lacks {missing}"


def test_only_the_config_module_reads_amdkv_variables():
    """`VerifierConfig.from_env()` (and ToolchainConfig's) is the one place the environment is read."""
    offenders = []
    for path in (ROOT / "amdkv").rglob("*.py"):
        if path.name == "config.py" and path.parent.name == "amdkv":
            continue
        text = path.read_text()
        for needle in ('environ.get("AMDKV_', "environ.get('AMDKV_", 'environ["AMDKV_', "getenv(\"AMDKV_"):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert not offenders, offenders


def test_closed_verifier_refuses_work(task):
    v = Verifier("cpu", spares=0)
    v.close()
    with pytest.raises(Exception, match="closed"):
        v.submit(task, source=GOOD)


def test_deadline_in_the_past_is_infra_error_not_a_verdict(task):
    import time

    with Verifier("cpu", spares=0) as v:
        verdict = v.submit(task, source=GOOD, deadline=time.monotonic() - 1).result()
    assert verdict.status == "infra_error" and verdict.reason == "not_started_before_deadline"
    assert verdict.correct is None and verdict.candidate_sha256 == Candidate(GOOD).sha256
    json.dumps(verdict.to_dict())  # machine-readable as it is
