"""The Hub side of a build: the folder equals what `push_to_hub` writes, `load_dataset("org/name")`
works through a Hub stand-in, `amdkv publish` uploads the folder.

The Hugging Face Hub is the one boundary these tests cannot reach. Where the Hub itself must
answer, it is either a real HTTP server on loopback that serves the built folder over the
endpoints `datasets` calls (tests/hub_standin.py), or `HfApi` mocked at its methods (and, for
`push_to_hub`, its `HfFileSystem` pointed at a local folder); everything on our side and on
`datasets`' side runs for real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import pytest

from amdkv.data.api import build_dataset
from amdkv.data.builder import Builder
from amdkv.data.store import open_store
from amdkv.data.hub_layout import build_datasetdict, data_dir_for
from amdkv.data.policy import BuildPolicy
from amdkv.data.schemas import dataset_spec
from amdkv.data.store import RecordStore
from amdkv.data.synthetic import make_corpus
from amdkv.errors import BadInputError

pytest.importorskip("datasets", reason="dataset builds need datasets (pip install 'amdkv[data]')")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_standin import HubStandIn  # noqa: E402


@pytest.fixture(scope="module")
def hip_build(tmp_path_factory):
    root = tmp_path_factory.mktemp("hip")
    corpus = make_corpus(70, n_tasks=6, seed=21, language="hip", trajectory_share=0.2)
    store = RecordStore(root / "records")
    store.extend(corpus.records)
    store.close()
    # small shards, so that splits have several (push_to_hub's sharding is compared below)
    report = build_dataset("hip", root / "records", root / "amdkv-hip", repo_id="amdkv/hip",
                           policy=BuildPolicy(max_shard_size="150KB"), progress=False)
    return root, report


class _MockedHub:
    """`HfApi` and `HfFileSystem` as `push_to_hub` uses them, backed by a local folder (the repo)."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.uploads: dict[str, bytes] = {}

    def patches(self):
        import datasets.dataset_dict as ddm
        from fsspec.implementations.local import LocalFileSystem
        from huggingface_hub import HfApi

        hub = self

        class Resolved(ddm.HfFileSystemResolvedRepositoryPath):
            def unresolve(self) -> str:  # the repo's files are this local folder
                return str(hub.repo)

        return [mock.patch.object(HfApi, "repo_info", lambda self, repo_id, **kw: types.SimpleNamespace(id=repo_id, sha="0" * 40)),
                mock.patch.object(HfApi, "preupload_lfs_files", hub.preupload),
                mock.patch.object(HfApi, "create_commit", hub.commit),
                mock.patch.object(ddm, "HfFileSystem", lambda **kw: LocalFileSystem()),
                mock.patch.object(ddm, "HfFileSystemResolvedRepositoryPath", Resolved)]

    def preupload(self, repo_id, additions, **kw):  # bound to the hub, so HfApi's self is not passed
        for addition in additions:  # the temp file is deleted right after: keep its bytes
            self.uploads[addition.path_in_repo] = Path(addition.path_or_fileobj).read_bytes()

    def commit(self, repo_id, operations, **kw):
        from huggingface_hub import CommitOperationDelete

        for op in operations:
            target = self.repo / op.path_in_repo
            if isinstance(op, CommitOperationDelete):
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(op.path_or_fileobj if isinstance(op.path_or_fileobj, bytes)
                               else self.uploads[op.path_in_repo])
        return types.SimpleNamespace(oid="1" * 40, commit_url="mock")


def test_folder_equals_what_push_to_hub_writes(hip_build, tmp_path):
    """The same DatasetDicts pushed with datasets' own `push_to_hub` (Hub mocked at HfApi and
    HfFileSystem) give byte-identical parquet shards at the same paths and the same README YAML
    (`configs`, `dataset_info`)."""
    from contextlib import ExitStack

    from huggingface_hub import DatasetCard

    root, _ = hip_build
    out = root / "amdkv-hip"
    plan = Builder(open_store(root / "records"), dataset_spec("hip"), BuildPolicy(max_shard_size="150KB"),
                   progress=False).plan()
    remote = tmp_path / "remote"
    remote.mkdir()
    hub = _MockedHub(remote)
    with ExitStack() as stack:
        for patch in hub.patches():
            stack.enter_context(patch)
        for config in plan.configs():
            dd = build_datasetdict(plan, config, tmp_path / "cache", progress=False)
            dd.push_to_hub("amdkv/hip", config_name=config, data_dir=data_dir_for(config, plan.spec.default_config),
                           set_default=config == plan.spec.default_config, max_shard_size=plan.policy.max_shard_size)
    ours = sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet"))
    theirs = sorted(str(p.relative_to(remote)) for p in remote.rglob("*.parquet"))
    assert ours == theirs and ours[0].startswith("data/") and any(p.startswith("hip2hip/") for p in ours)
    assert any("-00001-of-" in p for p in ours)  # several shards in a split
    for rel in ours:
        assert (out / rel).read_bytes() == (remote / rel).read_bytes(), rel
    mine = DatasetCard.load(out / "README.md").data.to_dict()
    pushed = DatasetCard.load(remote / "README.md").data.to_dict()
    assert mine["configs"] == pushed["configs"]
    assert mine["dataset_info"] == pushed["dataset_info"]
    assert next(c for c in mine["configs"] if c.get("default"))["config_name"] == "torch2hip"


def test_load_dataset_by_repo_id_through_a_hub_stand_in(hip_build, tmp_path):
    """`load_dataset("amdkv/hip")` and `("amdkv/hip", "torch2hip")` by repo id, in a fresh process
    whose HF_ENDPOINT is a real HTTP server on loopback serving the built folder (the Hub cannot
    be reached from tests), with empty caches and online mode."""
    root, report = hip_build
    code = """if True:
        import json, sys
        from datasets import load_dataset
        out = {}
        for args in (("amdkv/hip",), ("amdkv/hip", "torch2hip"), ("amdkv/hip", "hip2hip")):
            data = load_dataset(*args)
            out[" ".join(args)] = {s: [len(d), list(d.features)] for s, d in data.items()}
        print(json.dumps(out))
    """
    with HubStandIn(root / "amdkv-hip", "amdkv/hip") as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
        env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
                   PYTHONPATH=str(REPO))
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert not hub.unhandled, hub.unhandled
        assert any("/tree/" in r for r in hub.requests) and any(r.startswith("HEAD /datasets/amdkv/hip/resolve/")
                                                                for r in hub.requests)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = report["rows"]
    for key in ("amdkv/hip", "amdkv/hip torch2hip"):
        assert {s: n for s, (n, _) in loaded[key].items()} == {s: n for s, n in rows["torch2hip"].items() if n}
        assert "messages" in loaded[key]["train"][1] and "execution_verified" in loaded[key]["train"][1]
    assert {s: n for s, (n, _) in loaded["amdkv/hip hip2hip"].items()} == {s: n for s, n in rows["hip2hip"].items() if n}


def test_publish_dry_run_lists_the_files_and_calls_nothing(hip_build):
    """The Hub is mocked at HfApi: a dry run must not call it at all."""
    from huggingface_hub import HfApi

    from amdkv.data.publish import publish

    root, _ = hip_build
    with mock.patch.object(HfApi, "create_repo") as create, mock.patch.object(HfApi, "upload_folder") as upload:
        plan = publish(root / "amdkv-hip", "amdkv/hip", dry_run=True)
    create.assert_not_called()
    upload.assert_not_called()
    files = {f["path"] for f in plan["files"]}
    on_disk = {str(p.relative_to(root / "amdkv-hip")) for p in (root / "amdkv-hip").rglob("*") if p.is_file()}
    assert files == on_disk and "README.md" in files
    assert plan["default_config"] == "torch2hip" and "data/*" in plan["delete_patterns"]


def test_publish_uploads_through_hfapi_and_the_cli_dry_run(hip_build):
    """The Hub is mocked at HfApi: the calls publish makes are create_repo + upload_folder."""
    from huggingface_hub import HfApi

    from amdkv.data.publish import publish

    root, _ = hip_build
    commit = types.SimpleNamespace(oid="abc", commit_url="https://hub/commit/abc")
    with mock.patch.object(HfApi, "create_repo", return_value="https://hub/datasets/org/x") as create, \
            mock.patch.object(HfApi, "upload_folder", return_value=commit) as upload:
        result = publish(root / "amdkv-hip", "org/x", private=True)
    create.assert_called_once_with("org/x", repo_type="dataset", private=True, exist_ok=True)
    kwargs = upload.call_args.kwargs
    assert kwargs["folder_path"] == str(root / "amdkv-hip") and kwargs["repo_type"] == "dataset"
    data_dirs = {p.parent.name for p in (root / "amdkv-hip").rglob("*.parquet")}
    assert set(kwargs["delete_patterns"]) == {f"{d}/*" for d in data_dirs} and "data" in data_dirs
    assert result["commit"] == "abc"
    proc = subprocess.run([sys.executable, "-m", "amdkv.cli", "publish", str(root / "amdkv-hip"), "--repo-id", "org/x",
                           "--dry-run", "--json"], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert listed["dry_run"] and {f["path"] for f in listed["files"]} >= {"README.md", "build_report.json"}


def test_publish_refuses_an_incomplete_folder_and_a_bad_repo_id(hip_build, tmp_path):
    import shutil

    from amdkv.data.publish import publish

    root, _ = hip_build
    broken = tmp_path / "broken"
    shutil.copytree(root / "amdkv-hip", broken)
    for shard in (broken / "hip2hip").glob("*.parquet"):
        shard.unlink()
    with pytest.raises(BadInputError, match="config 'hip2hip'.*no file matches"):
        publish(broken, "org/x", dry_run=True)
    with pytest.raises(BadInputError, match="ORG/NAME"):
        publish(root / "amdkv-hip", "just-a-name", dry_run=True)
    (broken / "README.md").unlink()
    with pytest.raises(BadInputError, match="no README.md"):
        publish(broken, "org/x", dry_run=True)


def test_parquet_shards_of_a_multi_file_split_are_written_from_fresh_maps(tmp_path):
    """A split larger than datasets' Arrow shard size comes as several cache files. Its Parquet
    shards must be written from a map per shard (hub_layout._fresh_mapping), not from the split's
    one long-lived map, and the bytes must equal those written from the split itself."""
    import pyarrow.parquet as pq
    from datasets import Dataset, Features, Value, concatenate_datasets

    from amdkv.data import hub_layout

    features = Features({"uid": Value("string"), "code": Value("string")})
    parts = []
    for k in range(2):
        rows = [{"uid": f"{k}-{i}", "code": f"kernel {k} {i} " * 50} for i in range(300)]
        parts.append(Dataset.from_list(rows, features=features).flatten_indices(
            cache_file_name=str(tmp_path / f"part{k}.arrow")))
    split = concatenate_datasets(parts)
    assert len(split.cache_files) == 2 and split._indices is None
    with hub_layout._fresh_mapping(split) as fresh:
        assert fresh is not split and len(fresh) == len(split) and fresh[299]["uid"] == "0-299"
    out_a, out_b = tmp_path / "a", tmp_path / "b"
    _, _, paths = hub_layout.write_parquet_shards(split, out_a, "data", "train", max_shard_size=60_000)
    assert len(paths) > 1
    with mock.patch.object(hub_layout, "_fresh_mapping", lambda ds: __import__("contextlib").nullcontext(ds)):
        hub_layout.write_parquet_shards(split, out_b, "data", "train", max_shard_size=60_000)
    for p in paths:
        assert pq.read_table(out_a / p).equals(pq.read_table(out_b / p)), p
