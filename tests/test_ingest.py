"""`amdkv tasks ingest`: a KernelBook-layout corpus written for this test (tests/ingest_sample.py:
good rows, duplicates, broken, degenerate, misbehaving and wrongly-licensed ones), read as JSON
lines, parquet and a `save_to_disk` folder, plus a KernelBench-style folder. The rows' code runs
only in the sandboxed check processes (real fork-server children), never in the test process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("datasets", reason="ingestion reads tables with `datasets` (the `data` extra)")
pytest.importorskip("datasketch", reason="near duplicates need `datasketch` (the `data` extra)")

import ingest_sample  # noqa: E402
from amdkv.cli import main  # noqa: E402
from amdkv.tasks.ingest import dedup, licences  # noqa: E402
from amdkv.tasks.suites import load_suite  # noqa: E402

TIMEOUT = "8"  # the sample's looping row must time out; every other row takes well under a second


def _ingest(source: Path, out: Path, *extra: str) -> tuple[int, str]:
    """Exit code and stdout (with --json: the report alone); errors go to stderr, so failures show both."""
    res = CliRunner().invoke(main, ["tasks", "ingest", str(source), "--out", str(out), "--timeout", TIMEOUT,
                                    "--jobs", "2", *extra])
    return res.exit_code, res.stdout if res.exit_code == 0 and "--json" in extra else res.output


@pytest.fixture(scope="module")
def sample_jsonl(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "kernelbook_sample.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ingest_sample.rows()))
    return path


@pytest.fixture(scope="module")
def ingested(sample_jsonl, tmp_path_factory) -> tuple[Path, dict, str]:
    out = tmp_path_factory.mktemp("ingest") / "tasks"
    code, output = _ingest(sample_jsonl, out, "--json")
    assert code == 0, output[-3000:]
    return out, json.loads(output), output


def test_keeps_and_drops_the_right_rows_with_reasons(ingested):
    out, report, _ = ingested
    expected = ingest_sample.expected()
    got = {r["index"]: ("kept" if r["kept"] else r["reason"]) for r in report["rows"]}
    assert got == expected
    assert report["rows_in"] == len(expected)
    assert report["kept"] == sum(v == "kept" for v in expected.values())
    assert report["dropped_by_reason"] == {reason: sum(v == reason for v in expected.values())
                                           for reason in set(expected.values()) - {"kept"}}
    on_disk = json.loads((out / "ingest_report.json").read_text())
    assert on_disk["dropped_by_reason"] == report["dropped_by_reason"]
    # duplicates name the kept row they duplicate
    by_index = {r["index"]: r for r in report["rows"]}
    assert by_index[3]["duplicate_of"] == by_index[0]["task_id"]
    assert by_index[5]["duplicate_of"] == by_index[4]["task_id"]
    assert all(report["examples"][reason] for reason in report["dropped_by_reason"])


def test_kept_rows_are_loadable_tasks_with_licence_and_provenance(ingested):
    out, report, _ = ingested
    tasks = load_suite(str(out))
    kept = {r["task_id"]: r for r in report["rows"] if r["kept"]}
    assert sorted(t.id for t in tasks) == sorted(kept)
    rows = ingest_sample.rows()
    for t in tasks:
        row = rows[kept[t.id]["index"]]
        src = t.metadata["source"]
        assert (src["corpus"], src["entry_point"], src["repo_name"], src["sha"], src["uuid"]) == \
            ("kernelbook", row["entry_point"], row["repo_name"], row["sha"], row["uuid"])
        assert t.licence == licences.canonical(row["licenses"][0]) and row["uuid"] in t.provenance
        assert t.dtypes == ("fp32",) and t.cases[0].name == "default"
    gated = next(t for t in tasks if t.metadata["source"]["entry_point"] == "GatedLinear")
    assert gated.cases[0].init_inputs == [8, True]  # KernelBook's [[8], {'bias': True}] made positional
    assert not list(out.glob(".ingest-staging*"))


def test_rich_table_and_refusal_to_overwrite(ingested, sample_jsonl, tmp_path):
    out, report, _ = ingested
    code, output = _ingest(sample_jsonl, out, "--limit", "1")
    assert code == 2 and "not empty" in output and "--force" in output
    assert json.loads((out / "ingest_report.json").read_text())["rows_in"] == report["rows_in"]  # untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, output = _ingest(sample_jsonl, other, "--limit", "1", "--force")
    assert code == 2 and (other / "notes.txt").read_text() == "mine"
    fresh = tmp_path / "fresh"
    code, output = _ingest(sample_jsonl, fresh, "--limit", "4")
    text = " ".join(output.split())  # rich wraps lines at the test terminal's width
    assert code == 0 and "4 rows in, 3 kept, 1 dropped" in text and "exact_duplicate" in text


def test_parquet_and_saved_dataset_give_the_same_tasks(sample_jsonl, tmp_path):
    import datasets

    rows = [r for i, r in enumerate(ingest_sample.rows()) if i in (0, 3, 6, 22)]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(str(tmp_path / "part.parquet"))
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "saved"))
    kept = {}
    for name, source in (("parquet", tmp_path / "part.parquet"), ("saved", tmp_path / "saved")):
        code, output = _ingest(source, tmp_path / f"out_{name}", "--json", "--allow-licence", "MIT")
        assert code == 0, output[-2000:]
        report = json.loads(output)
        kept[name] = sorted(r["task_id"] for r in report["rows"] if r["kept"])
        assert [r.get("reason") for r in report["rows"]] == [None, "exact_duplicate", "licence_not_allowed",
                                                             "licence_not_allowed"]  # --allow-licence MIT only
    assert kept["parquet"] == kept["saved"] and len(kept["parquet"]) == 1


def test_kernelbench_folder_with_a_folder_licence(tmp_path):
    level = tmp_path / "bench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(ingest_sample.KERNELBENCH_STYLE.replace("torch.cumsum(x, dim=self.dim)",
                                                                               "torch.relu(x) * self.dim"))
    (level / "20_Cumsum.py").write_text(ingest_sample.KERNELBENCH_STYLE)
    (level / "21_Broken.py").write_text("class Model(:\n")
    code, output = _ingest(tmp_path / "bench", tmp_path / "no_licence", "--json")
    assert code == 1 and json.loads(output)["dropped_by_reason"] == {"no_licence": 3}
    code, output = _ingest(tmp_path / "bench", tmp_path / "mit", "--json", "--licence", "MIT", "--corpus", "kb")
    report = json.loads(output)
    assert code == 0 and report["layout"] == "kernelbench"
    assert [r.get("reason") for r in report["rows"]] == [None, None, "syntax_error"]
    tasks = load_suite(str(tmp_path / "mit"))
    assert sorted(t.id for t in tasks) == ["kb_l1_19_relu", "kb_l1_20_cumsum"]
    assert all(t.level == 1 and t.licence == "MIT" and t.suite == "kb" for t in tasks)


@pytest.mark.parametrize("make,words", [
    (lambda p: p / "missing.parquet", "does not exist"),
    (lambda p: (p / "bad.parquet").write_bytes(b"PAR1 this is not parquet") and p / "bad.parquet",
     "cannot read"),
    (lambda p: (p / "rows.jsonl").write_text('{"code": "x"}\n') and p / "rows.jsonl", "no `python_code` column"),
    (lambda p: (p / "rows.txt").write_text("x") and p / "rows.txt", "unknown file type"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "holds no data files"),
])
def test_bad_sources_are_clear_errors(tmp_path, make, words):
    code, output = _ingest(make(tmp_path), tmp_path / "out")
    assert code == 2 and words in output, output
    assert not (tmp_path / "out" / "ingest_report.json").exists()


def test_bad_options_are_clear_errors(sample_jsonl, tmp_path):
    code, output = _ingest(sample_jsonl, tmp_path / "o1", "--near-dup-threshold", "1.5")
    assert code == 2 and "near-dup-threshold" in output
    (tmp_path / "afile").write_text("x")
    code, output = _ingest(sample_jsonl, tmp_path / "afile")
    assert code == 2


def test_licence_parsing_and_allow_list():
    assert licences.parse_licences(["mit", "Apache 2.0"]) == ["MIT", "Apache-2.0"]
    assert licences.parse_licences('["bsd-3-clause"]') == ["BSD-3-Clause"]
    assert licences.parse_licences("MIT OR Apache-2.0") == ["MIT", "Apache-2.0"]
    assert licences.parse_licences(None) == licences.parse_licences("") == licences.parse_licences([]) == []
    allowed = licences.DEFAULT_ALLOWED
    assert licences.licence_verdict(["MIT", "BSD-3-Clause"], allowed) == (None, "MIT AND BSD-3-Clause")
    assert licences.licence_verdict(["MIT", "GPL-3.0"], allowed)[0] == licences.NOT_ALLOWED
    assert licences.licence_verdict(["Made-Up-1.0"], allowed)[0] == licences.NOT_ALLOWED
    assert licences.licence_verdict([], allowed)[0] == licences.NO_LICENCE
    assert licences.licence_verdict(["GPL-3.0"], ("GPL-3.0",))[0] is None  # the allow-list is configurable


def test_near_duplicates_by_minhash():
    near = dedup.NearDuplicates(0.85)
    base = ingest_sample.MIXER_BLOCK
    assert near.offer("a", base) is None
    hit = near.offer("b", ingest_sample.MIXER_BLOCK_VARIANT)
    assert hit is not None and hit[0] == "a" and hit[1] >= 0.85
    assert near.offer("c", ingest_sample.GATED_LINEAR) is None
    assert dedup.exact_key(ingest_sample.SCALED_SILU) == dedup.exact_key(ingest_sample.SCALED_SILU_COPY)
    assert dedup.exact_key(ingest_sample.SCALED_SILU) != dedup.exact_key(ingest_sample.GATED_LINEAR)
