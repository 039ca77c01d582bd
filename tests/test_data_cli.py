"""`amdkv build`, `amdkv records stats` and the dataset scripts, as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from amdkv.data.api import load_policy
from amdkv.data.scripts import load_config, main as run_script
from amdkv.data.store import RecordStore
from amdkv.data.synthetic import make_corpus

pytest.importorskip("datasets", reason="dataset builds need datasets (pip install 'amdkv[data]')")
REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    store = RecordStore(root / "records")
    store.extend(make_corpus(60, n_tasks=5, seed=31).records)
    store.close()
    return root / "records"


def _amdkv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "amdkv.cli", *args], env=ENV, capture_output=True, text=True,
                          timeout=600)


def test_build_command_reports_and_refuses_to_overwrite(records, tmp_path):
    out = tmp_path / "ds"
    proc = _amdkv("build", "triton", "--records", str(records), "--out", str(out), "--splits", "train=0.8,test=0.2",
                  "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["policy"]["splits"] == {"train": 0.8, "test": 0.2}
    assert report["records"] == 60 and (out / "README.md").is_file()
    table = _amdkv("build", "triton", "--records", str(records), "--out", str(out), "--overwrite")
    assert table.returncode == 0 and "rows out: torch2triton" in table.stdout and "records in" in table.stdout
    again = _amdkv("build", "triton", "--records", str(records), "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr and "--overwrite" in again.stderr
    bad = _amdkv("build", "triton", "--records", str(records), "--out", str(tmp_path / "x"), "--splits", "train")
    assert bad.returncode == 2 and "NAME=SHARE" in bad.stderr


def test_records_stats(records):
    proc = _amdkv("records", "stats", str(records), "--json")
    assert proc.returncode == 0
    stats = json.loads(proc.stdout)
    assert stats["records"] == 60 and set(stats["kinds"]) <= {"sample", "trajectory"} and stats["torn_tails"] == []


def test_dataset_script_runs_build_and_publish_dry_run(records, tmp_path, capsys):
    config = {"dataset": "triton", "repo_id": "org/triton", "records": str(records), "out": str(tmp_path / "out"),
              "policy": {"select": "correct", "splits": {"train": 1.0}}}
    path = tmp_path / "triton.yaml"
    path.write_text(yaml.safe_dump(config))
    assert run_script(path, ["--publish", "--dry-run"]) == 0
    assert "would upload" in capsys.readouterr().out
    assert (tmp_path / "out" / "data").is_dir()
    assert run_script(path, ["--steps", "generate"]) == 2  # no generate.command in this config


@pytest.mark.parametrize("name", ["hip", "triton", "rocm_qa"])
def test_shipped_dataset_configs_are_valid(name):
    config = load_config(REPO / "dataset_scripts" / f"{name}.yaml")
    policy = load_policy(None, config["policy"])
    assert config["repo_id"].startswith("amdkv/") and "builtin:eval" in policy.decontaminate
    assert (REPO / "dataset_scripts" / f"{name}.py").is_file()


def test_build_table_does_not_put_the_records_in_under_removed(capsys, monkeypatch):
    """The console table's "removed" column holds only what a step removed; the counts in (records,
    and the units the steps remove from) are details, so 3 in / 3 removed / 3 rows out reads right."""
    from amdkv.data.cli import print_build_report

    monkeypatch.setenv("COLUMNS", "200")
    report = {"dataset": "triton", "records": 3, "records_by_kind": {"trajectory": 3},
              "units_in": {"trajectory": 3, "turn": 9},
              "phases": [{"name": "policy", "removed": 3, "detail": {"status compile_error": 3}}],
              "rows": {"torch2triton": {"train": 3, "test": 0}}, "clusters": {"clusters": 3, "largest": 1}}
    print_build_report(report, "build/x")
    lines = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in capsys.readouterr().out.splitlines() if line.count("│") == 4}
    assert lines["records in"] == ["", "3 (trajectory 3)"]
    assert lines["units in"][0] == "" and lines["units in"][1].startswith("12 (trajectory 3, turn 9)")
    assert lines["policy"][0] == "3"
