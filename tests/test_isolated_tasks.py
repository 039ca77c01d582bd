"""Tasks loaded from source text in a sandboxed child process (amdkv/tasks/isolated.py): the
description matches an ordinary load, nothing of the task runs in this process, and tasks that
do not load say why. Real child processes (forked from the verifier's fork server)."""

from __future__ import annotations

import sys
import threading

import pytest

from amdkv.errors import InfrastructureError, TaskFormatError
from amdkv.tasks.builtin import task_path
from amdkv.tasks.isolated import IsolatedTaskCache, load_task_isolated
from amdkv.tasks.loader import load_task


@pytest.fixture()
def cache_dir(tmp_path):
    return tmp_path / "cache"


@pytest.mark.parametrize("task_id", ["l1_softmax", "rocm_moe_grouped_gemm"])
def test_description_matches_an_ordinary_load(task_id, cache_dir):
    path = task_path(task_id)
    want = load_task(path)
    got = load_task_isolated(path.read_text(), cache_dir=cache_dir, task_id=task_id)
    assert got.id == task_id and got.source == want.source and got.source_hash == want.source_hash
    for field in ("level", "op_family", "dtypes", "comparator", "tolerance", "licence", "provenance", "description"):
        assert getattr(got, field) == getattr(want, field), field
    assert [(c.name, c.tags, c.flops, c.min_bytes) for c in got.cases] == \
           [(c.name, c.tags, c.flops, c.min_bytes) for c in want.cases]
    assert got.path.startswith(str(cache_dir)) and open(got.path).read() == want.source
    with pytest.raises(InfrastructureError, match="only in worker processes"):
        got.cases[0].make_inputs()


def test_task_code_never_runs_in_this_process(tmp_path, cache_dir):
    marker = tmp_path / "imported_by.txt"
    source = task_path("l1_relu").read_text() + (
        f"\nimport os as _os\nwith open({str(marker)!r}, 'a') as _fh:\n    _fh.write(str(_os.getpid()) + '\\n')\n")
    # with the OS sandbox (the default) the loading child may not write outside its folder at all
    with pytest.raises(TaskFormatError, match="PermissionError"):
        load_task_isolated(source, cache_dir=cache_dir)
    assert not marker.exists()
    before = set(sys.modules)
    task = load_task_isolated(source, cache_dir=cache_dir, sandbox="off")  # off: the marker shows who ran it
    pids = [int(x) for x in marker.read_text().split()]
    assert pids and all(pid != __import__("os").getpid() for pid in pids)
    assert not [m for m in set(sys.modules) - before if "task_" in m]
    assert task.id.startswith("task_") and task.id == f"task_{__import__('hashlib').sha256(source.encode()).hexdigest()[:12]}"


@pytest.mark.parametrize("source, match", [
    ("import torch\nx = (\n", "syntax error"),
    ("import torch\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n", "no class `Model`"),
    ("raise RuntimeError('boom at import')\n", "boom at import"),
    ("import os\nos._exit(7)\n", "crashed the process that loaded it.*exit code 7"),
    ("   \n", "empty"),
])
def test_tasks_that_do_not_load_say_why(source, match, cache_dir):
    with pytest.raises(TaskFormatError, match=match):
        load_task_isolated(source, cache_dir=cache_dir)


def test_a_hanging_task_is_stopped(cache_dir):
    with pytest.raises(TaskFormatError, match="did not finish within 2 s"):
        load_task_isolated("while True:\n    pass\n", cache_dir=cache_dir, timeout=2)


def test_cache_loads_each_source_once_even_when_asked_at_once(cache_dir):
    cache = IsolatedTaskCache(lambda src, task_id=None: load_task_isolated(src, cache_dir=cache_dir, task_id=task_id))
    source = task_path("l1_relu").read_text()
    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(source, "relu_copy"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.loads == 1 and len(got) == 4 and all(t is got[0] for t in got)
    assert cache.get(source, "other_name").id == "other_name" and cache.loads == 2
