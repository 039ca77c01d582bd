"""The fault suite on the cpu platform: benchmarks/fault_suite_gpu.py run once (real verifier, real
worker processes, real OS sandbox), then one test per fault of tests/data/faults/manifest.json.

Each fault row must show: the expected verdict, the harness alive (the same verifier judges a correct
candidate next, on the same device), the next candidate ok, no leaked process (the script is a child
subreaper, so orphans of workers are its children and are seen), no leaked temp folder, and for
escapes no trace outside the sandbox. The control run repeats the escapes with the OS sandbox off:
there each must leave a trace, which shows the candidates are real escapes and that the OS sandbox
(not the static checks, which are skipped, nor the in-process audit hook, which they go around) is
what stops them. GPU-only faults are skipped here and run by the same script on the H200.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MANIFEST = json.loads((REPO / "tests" / "data" / "faults" / "manifest.json").read_text())


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("fault-suite")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "fault_suite_gpu.py"), "--device", "cpu",
                           "--out", str(out), "--control"], capture_output=True, text=True, timeout=1500)
    path = out / "fault_suite.json"
    assert path.is_file(), proc.stderr[-4000:]
    report = json.loads(path.read_text())
    report["returncode"], report["stderr"] = proc.returncode, proc.stderr[-4000:]
    assert (out / "fault_suite.md").read_text().count("\n| ") >= len(MANIFEST)
    return report


def _row(rows: list[dict], fault: str) -> dict:
    found = [r for r in rows if r["fault"] == fault]
    assert len(found) == 1, f"{fault}: {len(found)} rows"
    return found[0]


@pytest.mark.parametrize("fault", [e["fault"] for e in MANIFEST])
def test_fault(suite, fault):
    row = _row(suite["faults"], fault)
    if row["result"] == "skipped":
        pytest.skip(f"{fault}: {row['skip_reason']}")
    detail = json.dumps({k: v for k, v in row.items() if k != "why"}, indent=1)[:3000]
    assert row["verdict_right"], detail
    assert row["harness_alive"] and row["next_ok"], detail
    assert not row["leaks"]["processes"] and not row["leaks"]["folders"], detail
    assert not row["escaped"], detail
    assert row["result"] == "pass", detail


@pytest.mark.parametrize("fault", [e["fault"] for e in MANIFEST if e.get("escape") and not e.get("no_control")])
def test_escape_succeeds_without_the_os_sandbox(suite, fault):
    row = _row(suite["control"], fault)
    if row["result"] == "skipped":
        pytest.skip(f"{fault}: {row['skip_reason']}")
    assert row["escaped"], f"{fault} left no trace with the sandbox off: it proves nothing\n{row}"
    assert row["sandbox_applied"] == []


def test_the_suite_exits_zero_when_every_row_passes(suite):
    assert suite["returncode"] == 0, suite["stderr"]
