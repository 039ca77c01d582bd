"""Shared fixtures. Tests run offline (HF_* offline variables are set by `make test`)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reference caches of the test session live in a temp dir, not in the user's ~/.cache."""
    if "AMDKV_CACHE_DIR" not in os.environ:
        os.environ["AMDKV_CACHE_DIR"] = str(tmp_path_factory.mktemp("amdkv-cache"))
    # `evaluate.load` copies modules into HF_MODULES_CACHE (read when evaluate is first imported).
    os.environ.setdefault("HF_MODULES_CACHE", str(tmp_path_factory.mktemp("hf-modules")))
    # Every test that verifies means a real run: the verdict cache would answer a candidate that an
    # earlier test already verified. The tests of the cache itself switch it on explicitly.
    os.environ.setdefault("AMDKV_VERDICT_CACHE", "0")


INFRA_LOG = "AMDKV_TEST_INFRA_LOG"
_OWN_LOG = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """One file for the infra_error records of every test process (xdist workers inherit the
    variable: the controller configures before it starts them), printed at the end of the run."""
    if INFRA_LOG not in os.environ:
        fd, path = tempfile.mkstemp(prefix="amdkv-infra-errors-", suffix=".log")
        os.close(fd)
        os.environ[INFRA_LOG] = path
        config.stash[_OWN_LOG] = path  # this process made it: it removes it when the run ends
    handler = logging.FileHandler(os.environ[INFRA_LOG])
    handler.setFormatter(logging.Formatter(f"[pid %(process)d] %(message)s"))
    logging.getLogger("amdkv.verify").addHandler(handler)


# Test files whose few tests take minutes each on the 2-core machine (nvcc over torch's headers,
# the bundled references' fixture, DeepSpeed launches, the benchmark scripts at CPU size), slowest
# first. `make test` hands whole files to two workers (--dist loadfile) in collection order
# (--no-loadscope-reorder): xdist's default order, most tests first, started these last and left
# one core idle for minutes at the end of the run.
SLOW_FILES_FIRST = (
    "test_hip_cuda_layer.py", "test_builtin_solutions.py", "test_train_launch.py", "test_hip_build_split.py",
    "test_hip_build_lean.py", "test_train_benchmarks.py", "test_fault_suite.py", "test_crash_safe.py",
    "test_ray.py", "test_evaluate_modules.py", "test_adversarial.py", "test_loop.py",
)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow files first, then the rest by number of tests (xdist's own heuristic); a file's tests
    keep their order."""
    per_file: dict[str, int] = {}
    for item in items:
        per_file[item.path.name] = per_file.get(item.path.name, 0) + 1

    def rank(item: pytest.Item) -> tuple[int, int, str]:
        name = item.path.name
        slow = SLOW_FILES_FIRST.index(name) if name in SLOW_FILES_FIRST else len(SLOW_FILES_FIRST)
        return slow, -per_file[name], str(item.path)

    items.sort(key=rank)  # stable: the order inside a file is kept


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Every infra_error a verifier in this run handed out (tests that expect some included): when
    a test fails on one, its cause is here, not only a status in an assertion."""
    if hasattr(config, "workerinput"):
        return
    path = Path(os.environ.get(INFRA_LOG, ""))
    text = path.read_text(errors="replace") if path.is_file() else ""
    if text.strip():
        terminalreporter.write_sep("=", f"infra_error verdicts in this run ({text.count('infra_error (')})")
        terminalreporter.write_line(text[-20000:])


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_OWN_LOG, None)
    if path:
        Path(path).unlink(missing_ok=True)
        os.environ.pop(INFRA_LOG, None)


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None


LEASE_HOLDER = """
import sys, time
from amdkv.verify.reference_cache import CaseFiles, Leases
leases = Leases()
leases.take(CaseFiles(sys.argv[1], sys.argv[2]))
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def lease_holder():
    """Starts processes that hold a reference-cache entry's lease, as a verifier in another process
    does while it verifies: `hold(cache_dir, key)` returns once the lease is held. Killed at the end."""
    import subprocess
    import sys

    procs: list[subprocess.Popen] = []

    def hold(cache_dir, key: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", LEASE_HOLDER, key, str(cache_dir)], stdout=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


@pytest.fixture
def fake_libcuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty shared library named libcuda.so.1 in place of the NVIDIA driver's, for building
    Triton's C helpers (driver stub, launchers) on this machine: they link against it, and nothing
    here loads what is built. The driver stub's per-process memo is cleared around the test."""
    import subprocess

    pytest.importorskip("triton", reason="Triton's C helpers are Triton's")
    from triton.backends.nvidia import driver as nv

    from amdkv.verify import triton_stubs

    lib = tmp_path / "lib"
    lib.mkdir()
    empty = tmp_path / "empty.c"
    empty.write_text("int amdkv_placeholder;\n")
    subprocess.run(["gcc", "-shared", "-fPIC", str(empty), "-o", str(lib / "libcuda.so.1")], check=True)
    monkeypatch.setattr(nv, "library_dirs", lambda: [str(lib)])
    triton_stubs.cuda_driver_stub.cache_clear()
    yield lib
    triton_stubs.cuda_driver_stub.cache_clear()
