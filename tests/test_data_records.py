"""Records and the record store: ids, work keys, resume after SIGKILL, bad input that loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from amdkv.data.records import RECORD_SCHEMA_VERSION, Record, work_key
from amdkv.data.store import RecordStore
from amdkv.data.synthetic import make_corpus, make_qa_records
from amdkv.errors import BadInputError

REPO = Path(__file__).resolve().parent.parent
VERDICTS = REPO / "tests" / "data" / "verdicts"


@pytest.fixture(scope="module")
def corpus():
    return make_corpus(40, n_tasks=6, seed=3)


def _real_sample():
    """A record from a real verdict of the bundled softmax solution (tests/data/verdicts)."""
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.candidate import Candidate

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_softmax")
    verdict = json.loads((VERDICTS / "ok_softmax_gfx942.json").read_text())
    candidate = Candidate(solution_path("l1_softmax").read_text(), language="triton", origin={"model": "m", "sample": 0})
    verdict["candidate_sha256"] = candidate.sha256
    return task, candidate, verdict


def test_record_from_verification_round_trips_and_hashes_content():
    task, candidate, verdict = _real_sample()
    record = Record.from_verification(task, candidate, verdict)
    data = json.loads(json.dumps(record.to_dict()))
    back = Record.from_dict(data)
    assert back == record and back.id == record.id == data["id"]
    assert record.verdict == verdict  # the whole verdict, exactly
    assert record.task["source"] == task.source and record.task["suite_version"] == task.metadata["suite_version"]
    assert record.origin == {"model": "m", "sample": 0} and record.licence == task.licence
    # the id is a content hash: any change of content changes it; the work key ignores the outcome
    changed = Record.from_verification(task, candidate, {**verdict, "diagnostics": "x"})
    assert changed.id != record.id and changed.work_key == record.work_key
    assert record.work_key == work_key("sample", task_id=task.id, task_source_hash=task.source_hash,
                                       language="triton", origin={"model": "m", "sample": 0})


def test_record_refuses_a_verdict_about_another_candidate_or_task():
    task, candidate, verdict = _real_sample()
    with pytest.raises(BadInputError, match="judged candidate"):
        Record.from_verification(task, candidate, {**verdict, "candidate_sha256": "0" * 64})
    with pytest.raises(BadInputError, match="about task"):
        Record.from_verification(task, candidate, {**verdict, "task_id": "l1_relu"})


def test_from_dict_refuses_other_schema_versions_edits_and_unknown_fields():
    task, candidate, verdict = _real_sample()
    data = Record.from_verification(task, candidate, verdict).to_dict()
    with pytest.raises(BadInputError, match="schema version 2"):
        Record.from_dict({**data, "schema_version": RECORD_SCHEMA_VERSION + 1})
    with pytest.raises(BadInputError, match="content hash"):
        Record.from_dict({**data, "licence": "MIT"})
    with pytest.raises(BadInputError, match="unknown field"):
        Record.from_dict({**data, "extra": 1})


def test_trajectory_and_qa_records(corpus):
    traj = next(r for r in corpus.records if r.kind == "trajectory")
    again = Record.from_dict(traj.to_dict())
    assert again.trajectory_object().turns[0].verdict == traj.trajectory["turns"][0]["verdict"]
    qa = make_qa_records(2, seed=1)[0]
    assert Record.from_dict(qa.to_dict()).qa == qa.qa
    with pytest.raises(BadInputError, match="line range"):
        Record.from_qa(**{**qa.qa, "line_start": 10, "line_end": 3}, licence="MIT", provenance="x")


def test_store_appends_once_resumes_by_work_key_and_rotates_shards(tmp_path, corpus):
    store = RecordStore(tmp_path / "s", max_shard_bytes=20_000)
    assert store.extend(corpus.records[:10]) == 10
    assert store.append(corpus.records[0]) is False  # the same content is stored once
    assert store.done(corpus.records[3].work_key) and not store.done("0" * 32)
    store.close()
    again = RecordStore(tmp_path / "s", max_shard_bytes=20_000)
    assert len(again) == 10 and corpus.records[9].id in again
    again.extend(corpus.records[10:])
    again.close()
    assert len(RecordStore(tmp_path / "s").shard_paths()) > 1
    assert sorted(r.id for r in RecordStore(tmp_path / "s")) == sorted(r.id for r in corpus.records)


WRITER = textwrap.dedent("""
    import sys, time
    from amdkv.data.store import RecordStore
    from amdkv.data.synthetic import make_corpus
    corpus = make_corpus(int(sys.argv[2]), n_tasks=8, seed=11)
    store = RecordStore(sys.argv[1])
    for record in corpus.records:
        if store.done(record.work_key):   # resume: skip the work already recorded
            continue
        store.append(record)
        print(record.id, flush=True)
        time.sleep(float(sys.argv[3]))
    store.close()
""")


def _run_writer(store: Path, n: int, pause: float) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(store), str(n), str(pause)], env=env,
                            stdout=subprocess.PIPE, text=True)


def test_sigkill_during_writing_then_resume_gives_the_records_of_an_uninterrupted_run(tmp_path):
    n = 60
    full = _run_writer(tmp_path / "full", n, 0.0)
    full.communicate(timeout=300)
    assert full.returncode == 0
    killed = _run_writer(tmp_path / "killed", n, 0.05)
    written = 0
    deadline = time.monotonic() + 240
    while written < 12 and time.monotonic() < deadline:  # let it write some, then kill it mid-run
        if killed.stdout.readline():
            written += 1
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    partial = RecordStore(tmp_path / "killed")
    assert written <= len(partial) < n  # nothing acknowledged was lost, and the run was cut short
    partial.close()
    resumed = _run_writer(tmp_path / "killed", n, 0.0)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0
    ids = [r.id for r in RecordStore(tmp_path / "killed")]
    assert len(ids) == len(set(ids)) == n  # no duplicates
    assert sorted(ids) == sorted(r.id for r in RecordStore(tmp_path / "full"))
    assert len(out.split()) == n - len(partial)  # the resumed run did only the missing work


def test_torn_tail_of_a_killed_write_is_skipped_then_repaired(tmp_path, corpus):
    store = RecordStore(tmp_path / "s")
    store.extend(corpus.records[:5])
    store.close()
    shard = store.shard_paths()[0]
    line = json.dumps(corpus.records[5].to_dict())
    with open(shard, "a") as fh:  # what a SIGKILL in the middle of write() leaves
        fh.write(line[: len(line) // 2])
    with pytest.warns(UserWarning, match="torn last line"):
        assert [r.id for r in RecordStore(tmp_path / "s", create=False)] == [r.id for r in corpus.records[:5]]
    reopened = RecordStore(tmp_path / "s")
    assert len(reopened) == 5  # opening for writing repairs the dead writer's tail ...
    assert shard.read_bytes().endswith(b"\n")
    reopened.append(corpus.records[5])
    reopened.close()
    assert len(list(RecordStore(tmp_path / "s"))) == 6  # ... and nothing is glued onto a torn line


def test_corrupt_shard_and_foreign_schema_give_clear_errors_and_change_nothing(tmp_path, corpus):
    store = RecordStore(tmp_path / "s")
    store.extend(corpus.records[:4])
    store.close()
    shard = store.shard_paths()[0]
    lines = shard.read_text().splitlines(keepends=True)
    lines[1] = lines[1][:300] + "\x00\x00 bit rot" + lines[1][320:]  # damaged in the middle, not torn
    shard.write_text("".join(lines))
    before = shard.read_bytes()
    with pytest.raises(BadInputError, match=r"line 2 is corrupt") as info:
        list(RecordStore(tmp_path / "s", create=False))
    assert "nothing was changed" in info.value.hint
    assert shard.read_bytes() == before

    other = RecordStore(tmp_path / "v")
    other.extend(corpus.records[:2])
    other.close()
    data = json.loads(other.shard_paths()[0].read_text().splitlines()[0])
    data["schema_version"] = RECORD_SCHEMA_VERSION + 1
    with open(other.shard_paths()[0], "a") as fh:
        fh.write(json.dumps(data) + "\n")
    with pytest.raises(BadInputError, match="schema version 2"):
        list(RecordStore(tmp_path / "v", create=False))
    meta = json.loads((tmp_path / "v" / "store.json").read_text())
    (tmp_path / "v" / "store.json").write_text(json.dumps({**meta, "record_schema_version": 99}))
    with pytest.raises(BadInputError, match="schema version 99"):
        RecordStore(tmp_path / "v")
    with pytest.raises(BadInputError, match="no record store"):
        RecordStore(tmp_path / "missing", create=False)


def test_record_layer_and_cli_import_light():
    """Generators write records on bare GPU machines: records, store and the CLI registration
    import neither datasets, datasketch, huggingface_hub nor torch."""
    code = ("import sys, amdkv.data, amdkv.data.records, amdkv.data.store, amdkv.cli; "
            "print(sorted(m for m in ('datasets', 'datasketch', 'huggingface_hub', 'torch', 'pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_column_is_documented_for_the_card():
    pytest.importorskip("datasets", reason="dataset builds need datasets (pip install 'amdkv[data]')")
    from amdkv.data.schemas import COLUMN_DOCS, SCHEMA_VERSIONS, features

    for kind in SCHEMA_VERSIONS:
        missing = [c for c in features(kind) if c not in COLUMN_DOCS]
        assert not missing, (kind, missing)
