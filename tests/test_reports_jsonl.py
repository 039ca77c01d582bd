"""JsonlAppender: the one writer of result files that must survive a killed run."""

from __future__ import annotations

import json
import threading

import pytest

from amdkv.reports.jsonl import JsonlAppender
from amdkv.tasks.builtin import task_path


def test_fresh_truncates_and_append_keeps(tmp_path):
    p = tmp_path / "out" / "v.jsonl"
    with JsonlAppender(p, fresh=True) as out:
        out.append({"a": 1})
    with JsonlAppender(p) as out:          # a resumed run appends
        out.append({"a": 2})
    assert [json.loads(x)["a"] for x in p.read_text().splitlines()] == [1, 2]
    with JsonlAppender(p, fresh=True) as out:  # a new run starts empty
        out.append({"a": 3})
    assert [json.loads(x)["a"] for x in p.read_text().splitlines()] == [3]


def test_strict_json_unless_asked(tmp_path):
    with JsonlAppender(tmp_path / "s.jsonl") as out, pytest.raises(ValueError):
        out.append({"x": float("nan")})
    with JsonlAppender(tmp_path / "l.jsonl", allow_nan=True) as out:
        out.append({"x": float("nan")})
    assert "NaN" in (tmp_path / "l.jsonl").read_text()


def test_concurrent_appends_stay_whole_lines(tmp_path):
    p = tmp_path / "c.jsonl"
    with JsonlAppender(p, fresh=True) as out:
        threads = [threading.Thread(target=lambda i=i: [out.append({"t": i, "k": k, "pad": "x" * 500})
                                                        for k in range(25)]) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rows = [json.loads(x) for x in p.read_text().splitlines()]
    assert len(rows) == 100 and {(r["t"], r["k"]) for r in rows} == {(i, k) for i in range(4) for k in range(25)}


def test_builtin_task_path():
    assert task_path("l1_relu").name == "l1_relu.py" and task_path("rocm_silu_and_mul").parent.name == "rocm"
    assert task_path("no_such_task") is None
