"""Task format: loading, validation errors, builtin suites, split and version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from amdkv.errors import TaskFormatError
from amdkv.tasks import builtin
from amdkv.tasks.loader import load_task
from amdkv.tasks.split import near_duplicate_clusters
from amdkv.tasks.suites import filter_tasks, load_builtin, load_suite, suite_version

GOOD = '''
import torch, torch.nn as nn
METADATA = {"level": 1, "op_family": "elementwise", "dtypes": ["fp32"], "licence": "Apache-2.0"}
class Model(nn.Module):
    def forward(self, x):
        return x * 2
def get_inputs():
    return [torch.randn(8)]
def get_init_inputs():
    return []
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plain_kernelbench_file_gets_one_case_tagged_both(tmp_path: Path) -> None:
    task = load_task(write(tmp_path, "double.py", GOOD))
    assert task.id == "double"
    assert [c.name for c in task.cases] == ["default"]
    assert task.cases[0].is_correctness and task.cases[0].is_performance
    assert task.level == 1 and task.dtypes == ("fp32",)


@pytest.mark.parametrize("text,needle", [
    (GOOD.replace("class Model", "class Other"), "defines no class `Model`"),
    (GOOD.replace("def get_inputs", "def get_inputz"), "`get_inputs()`"),
    (GOOD + "\ndef get_cases():\n    return [{'name': 'a', 'tags': ['fast']}]\n", "tags"),
    (GOOD + "\ndef get_cases():\n    return [{'name': 'a'}, {'name': 'a'}]\n", "duplicate case name"),
    (GOOD.replace('"licence"', '"comparator": "fuzzy", "licence"'), "comparator"),
    ("def broken(:\n", "syntax error"),
])
def test_bad_task_files_say_what_is_wrong(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(TaskFormatError) as err:
        load_task(write(tmp_path, "t.py", text))
    assert needle in str(err.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="cannot read"):
        load_task(tmp_path / "nope.py")


def test_builtin_tasks_meet_the_bundled_rules() -> None:
    tasks = load_builtin()
    assert len(tasks) >= 20
    ids = [t.id for t in tasks]
    assert len(ids) == len(set(ids)), "task ids must be unique across suites"
    levels = {t.level for t in tasks}
    assert {1, 2, 3} <= levels
    for t in tasks:
        corr = t.cases_tagged("correctness")
        assert len(corr) >= 2, f"{t.id}: needs >= 2 correctness cases"
        assert t.cases_tagged("performance"), f"{t.id}: needs a performance case"
        assert t.licence != "unknown" and t.op_family != "unknown", t.id
        assert builtin.solution_path(t.id, "triton") is not None, f"{t.id}: no Triton reference solution"


def test_split_is_deterministic_and_keeps_clusters_together() -> None:
    a, b = load_builtin(), load_builtin()
    assert [(t.id, t.split) for t in a] == [(t.id, t.split) for t in b]
    assert {t.split for t in a} == {"train", "eval"}
    for cluster in near_duplicate_clusters(a):
        assert len({t.split for t in cluster}) == 1


def test_near_copy_lands_in_the_same_cluster(tmp_path: Path) -> None:
    t1 = load_task(write(tmp_path, "a.py", GOOD))
    t2 = load_task(write(tmp_path, "b.py", GOOD.replace("x * 2", "x * 3")))
    t3 = load_task(builtin.task_files()[0])
    clusters = near_duplicate_clusters([t1, t2, t3])
    assert any({t.id for t in c} == {"a", "b"} for c in clusters)


def test_suite_version_changes_with_any_task(tmp_path: Path) -> None:
    t1 = load_task(write(tmp_path, "a.py", GOOD))
    v1 = suite_version([t1])
    t1b = load_task(write(tmp_path, "a.py", GOOD.replace("x * 2", "x * 4")))
    assert suite_version([t1b]) != v1


def test_filters_and_specs() -> None:
    tasks = load_suite("builtin:all")
    lvl1 = filter_tasks(tasks, level=1)
    assert lvl1 and all(t.level == 1 for t in lvl1)
    assert {t.id for t in load_suite("builtin:level1")} == {t.id for t in lvl1}
    train, ev = load_suite("builtin:train"), load_suite("builtin:eval")
    assert not ({t.id for t in train} & {t.id for t in ev})
    assert len(train) + len(ev) == len(tasks)


def test_tasks_list_cli_json() -> None:
    out = subprocess.run([sys.executable, "-m", "amdkv.cli", "tasks", "list", "--json", "--level", "1"],
                         capture_output=True, text=True, check=True)
    data = json.loads(out.stdout)
    assert data["suite_version"]
    assert data["tasks"] and all({"id", "level", "op_family", "dtypes"} <= set(t) for t in data["tasks"])
    assert all(t["level"] == 1 for t in data["tasks"])


def test_select_ids_keeps_suite_order_and_says_where_an_unknown_id_is() -> None:
    """`--task ID` of `amdkv gen` and `amdkv demo` (one helper): the suite's order, and an id the
    suite lacks named with its bundled split, or the closest ids of the suite."""
    from amdkv.errors import BadInputError
    from amdkv.tasks.suites import load_suite, select_ids

    train, held = load_suite("builtin:train"), load_suite("builtin:eval")
    picked = select_ids(train, [train[2].id, train[0].id], "builtin:train")
    assert [t.id for t in picked] == [train[0].id, train[2].id]
    with pytest.raises(BadInputError, match="unknown task id") as other_split:
        select_ids(train, [held[0].id], "builtin:train")
    assert f"{held[0].id} is in builtin:eval" in other_split.value.hint
    typo = train[0].id + "x"
    with pytest.raises(BadInputError) as close:
        select_ids(train, [typo], "builtin:train")
    assert f"did you mean {train[0].id}" in close.value.hint


def test_a_bundled_task_loaded_by_path_keeps_its_suite(tmp_path: Path) -> None:
    """`amdkv verify amdkv/tasks/builtin/general/l1_relu.py ...` records suite `general` (its folder),
    as `builtin:all` does; a task file elsewhere is `custom` unless told otherwise."""
    path = builtin.task_path("l1_relu")
    assert load_task(path).suite == path.parent.name == "general"
    assert load_task(path, suite="mine").suite == "mine"
    copy = tmp_path / "l1_relu.py"
    copy.write_text(path.read_text())
    assert load_task(copy).suite == "custom"
