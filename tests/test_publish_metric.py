"""`amdkv publish-metric`: staging and checking a metric Space (and its tasks dataset), then the
upload through `huggingface_hub.HfApi`, which is MOCKED here (the Hub is the one boundary we cannot
reach). What the mock receives is checked as the Hub would get it: the staged folders' contents at
upload time, and the tasks folder loads back into the same tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("evaluate", reason="publishing checks that evaluate.load finds the module (amdkv[eval])")

from amdkv.cli import main  # noqa: E402
from amdkv.errors import BadInputError  # noqa: E402
from amdkv.evaluation.publish_metric import publish_metric  # noqa: E402
from amdkv.tasks.suites import load_suite  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "external"


class RecordingHfApi:
    """Stands in for huggingface_hub.HfApi: records calls and keeps a copy of each uploaded folder."""

    calls: list[tuple[str, dict]] = []
    uploads: dict[str, Path] = {}
    keep: Path = Path(".")

    def create_repo(self, repo_id: str, **kw: object) -> str:
        RecordingHfApi.calls.append(("create_repo", {"repo_id": repo_id, **kw}))
        return f"https://hub.invalid/{repo_id}"

    def upload_folder(self, *, folder_path: str, repo_id: str, **kw: object) -> str:
        RecordingHfApi.calls.append(("upload_folder", {"repo_id": repo_id, **kw}))
        dest = RecordingHfApi.keep / repo_id.replace("/", "__")
        shutil.copytree(folder_path, dest)
        RecordingHfApi.uploads[repo_id] = dest
        return "commit-oid"


def test_dry_run_stages_and_checks_without_uploading(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: pytest.fail("a dry run must not touch the Hub"))
    result = publish_metric(str(REPO / "eval" / "metrics" / "rocmbench"), "amdkv/rocmbench", dry_run=True)
    assert result["space_files"] == ["README.md", "index.html", "requirements.txt", "rocmbench.py"]
    assert result["loads_as"] == "Rocmbench" and result["log"][-1] == "dry run: nothing uploaded"


def test_upload_creates_a_static_space_and_a_tasks_dataset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    RecordingHfApi.calls, RecordingHfApi.uploads, RecordingHfApi.keep = [], {}, tmp_path
    monkeypatch.setattr(huggingface_hub, "HfApi", RecordingHfApi)
    spec = f"tritonbench-g:{DATA / 'tritonbench'}"
    result = publish_metric(str(REPO / "eval" / "metrics" / "tritonbench_g"), "amdkv/tritonbench_g", tasks_spec=spec)
    kinds = [(name, kw.get("repo_type"), kw["repo_id"]) for name, kw in RecordingHfApi.calls]
    assert kinds == [("create_repo", "space", "amdkv/tritonbench_g"), ("upload_folder", "space", "amdkv/tritonbench_g"),
                     ("create_repo", "dataset", "amdkv/tritonbench_g-tasks"),
                     ("upload_folder", "dataset", "amdkv/tritonbench_g-tasks")]
    assert RecordingHfApi.calls[0][1]["space_sdk"] == "static"
    space = RecordingHfApi.uploads["amdkv/tritonbench_g"]
    assert (space / "tritonbench_g.py").read_text() == (REPO / "eval/metrics/tritonbench_g/tritonbench_g.py").read_text()
    assert "evaluate.load(\"amdkv/tritonbench_g\")" in (space / "index.html").read_text()
    dataset = RecordingHfApi.uploads["amdkv/tritonbench_g-tasks"]
    assert (dataset / "LICENSE").is_file() and (dataset / "data" / "TritonBench_G_v1.json").is_file()
    assert "license: apache-2.0" in (dataset / "README.md").read_text()
    original = {t.id: t.source_hash for t in load_suite(spec)}
    published = {t.id: t.source_hash for t in load_suite(f"tritonbench-g:{dataset}")}
    assert published == original  # what the module downloads loads into the same tasks
    assert result["tasks"]["repo_id"] == "amdkv/tritonbench_g-tasks"


def test_refusals_say_why(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="may not be republished"):
        publish_metric(str(REPO / "eval" / "metrics" / "rocmbench"), "amdkv/rocmbench",
                       tasks_spec=f"rocmbench:{DATA / 'rocm'}", dry_run=True)
    with pytest.raises(BadInputError, match="use --repo-id ORG/rocmbench"):
        publish_metric(str(REPO / "eval" / "metrics" / "rocmbench"), "amdkv/other", dry_run=True)
    bad = tmp_path / "mymetric"
    bad.mkdir()
    (bad / "mymetric.py").write_text("import evaluate\n\nclass X(evaluate.Metric):\n    pass\n")
    (bad / "README.md").write_text("# no front matter\n")
    with pytest.raises(BadInputError, match="front matter"):
        publish_metric(str(bad), "org/mymetric", dry_run=True)


def test_cli_dry_run_json() -> None:
    res = CliRunner().invoke(main, ["publish-metric", str(REPO / "eval" / "metrics" / "kernelbench"),
                                    "--repo-id", "amdkv/kernelbench", "--tasks", f"kernelbench:{DATA / 'kernelbench'}",
                                    "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["dry_run"] and out["tasks"]["licences"] == ["MIT"] and out["tasks"]["files"] == 7  # 3 problems, LICENSE, 3 prompt files
