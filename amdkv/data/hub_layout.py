"""Write a planned build in the Hub layout, exactly as `DatasetDict.push_to_hub` would, and read
such a folder back (configs, data files) for `publish` and `reverify`.

What `push_to_hub(repo, config_name=C, data_dir=D, set_default=...)` does, per split (datasets
5.2, `Dataset._push_parquet_shards_to_hub`): estimate the split's size (`_estimate_nbytes`),
pick the row-group size (`get_writer_batch_size_from_*`), cut the split into
`int(size / max_shard_size) + 1` contiguous shards and write each with `shard.to_parquet(...,
batch_size=...)` to `D/<split>-<index:05d>-of-<n:05d>.parquet`; then record every config in the
README's YAML (`MetadataConfigs`: `configs` with `data_files` patterns `D/<split>-*`, `default:
true` on the default config; `DatasetInfosDict`: features, split sizes, download and dataset
sizes). The default config lives in `data/`, every other config in `<config>/`. We do the same,
calling the same functions, so a folder we write is what the Hub would serve after the same
pushes; a test compares both byte for byte through a mocked Hub.

Each split is built with `Dataset.from_generator` (explicit `fingerprint=`, a private cache
folder) from the plan's row generator, so memory stays bounded by one writer batch.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from amdkv.data.builder import Plan, peak_rss_mib
from amdkv.errors import BadInputError

REPORT_FILE = "build_report.json"
README = "README.md"


def data_dir_for(config: str, default_config: str) -> str:
    """Where `push_to_hub` puts a config's files: `data/` for the default config (pushed with
    `data_dir="data"`), `<config>/` for every other one (its default `data_dir`)."""
    return "data" if config == default_config else config


def build_split(plan: Plan, config: str, split: str, cache_dir: str | os.PathLike[str], *, progress: bool = True):
    """The `datasets.Dataset` of one (config, split) of the plan (cached by the plan's fingerprint)."""
    from datasets import Dataset
    from tqdm import tqdm

    total = len(plan.entries[config][split])

    def rows():
        bar = tqdm(total=total, desc=f"rows {config}/{split}", unit="row", disable=not progress, file=sys.stderr)
        try:
            for row in plan.rows(config, split, workers=plan.workers):
                bar.update(1)
                yield row
        finally:
            bar.close()

    with datasets_progress(False):  # ours shows the rows; datasets' own bar would repeat them
        return Dataset.from_generator(rows, features=plan.features(config), cache_dir=str(cache_dir),
                                      fingerprint=plan.fingerprint(config, split), split=split)


@contextlib.contextmanager
def datasets_progress(enabled: bool):
    """`datasets`' own progress bars on or off for a block (restored afterwards)."""
    from datasets.utils.logging import disable_progress_bar, enable_progress_bar, is_progress_bar_enabled

    was_enabled = is_progress_bar_enabled()
    (enable_progress_bar if enabled and was_enabled else disable_progress_bar)()
    try:
        yield
    finally:
        (enable_progress_bar if was_enabled else disable_progress_bar)()


def build_datasetdict(plan: Plan, config: str, cache_dir: str | os.PathLike[str], *, progress: bool = True):
    """The `DatasetDict` of one config (what the builders return: records -> DatasetDict)."""
    from datasets import DatasetDict

    return DatasetDict({split: build_split(plan, config, split, cache_dir, progress=progress)
                        for split in plan.splits(config)})


def write_parquet_shards(dataset, folder: Path, data_dir: str, split: str, max_shard_size: int | str) -> tuple[Any, int, list[str]]:
    """`push_to_hub`'s shard writing for one split: (SplitInfo, bytes written, paths in the repo)."""
    from datasets.arrow_writer import get_writer_batch_size_from_data_size, get_writer_batch_size_from_features
    from datasets.splits import SplitInfo
    from datasets.utils.py_utils import convert_file_size_to_int

    nbytes = dataset._estimate_nbytes()  # push_to_hub's own estimate (datasets 5.2): the YAML sizes come from it
    batch = get_writer_batch_size_from_features(dataset.features) or get_writer_batch_size_from_data_size(
        len(dataset), nbytes)
    num_shards = int(nbytes / convert_file_size_to_int(max_shard_size)) + 1
    written, paths = 0, []
    (folder / data_dir).mkdir(parents=True, exist_ok=True)
    for index in range(num_shards):
        path_in_repo = f"{data_dir}/{split}-{index:05d}-of-{num_shards:05d}.parquet"
        with _fresh_mapping(dataset) as source:
            source.shard(num_shards=num_shards, index=index, contiguous=True).to_parquet(
                str(folder / path_in_repo), batch_size=batch)
        written += (folder / path_in_repo).stat().st_size
        paths.append(path_in_repo)
    return SplitInfo(name=split, num_bytes=nbytes, num_examples=len(dataset)), written, paths


@contextlib.contextmanager
def _fresh_mapping(dataset):
    """The same dataset on a memory map of its own, closed after one shard is written.

    Why: pages of a memory-mapped Arrow file that have been read count as the process's resident
    memory for as long as the map lives. Writing shard after shard from one map would hold the
    whole split (measured ~30 KB a row) in RSS; a map per shard holds at most one shard
    (<= max_shard_size). Same table, same features: the parquet bytes are the same.

    A split larger than `datasets`' own Arrow shard size (500 MB) comes as several cache files; until
    session 7 such a split fell back to the one long-lived map, and the 100k-record build's largest
    process held 1.6 GB of file-backed pages (2.02 GiB RSS) while writing its largest split."""
    from datasets import Dataset, concatenate_datasets

    files = [f["filename"] for f in dataset.cache_files]
    if not files or dataset._indices is not None:
        yield dataset
        return
    parts = [Dataset.from_file(f, info=dataset.info, split=dataset.split) for f in files]
    fresh = parts[0] if len(parts) == 1 else concatenate_datasets(parts, info=dataset.info, split=dataset.split)
    del parts
    try:
        yield fresh
    finally:
        del fresh  # reference counting closes the maps (a gc.collect over a large plan costs seconds)


def card_yaml(features_by_config: dict[str, Any], splits_by_config: dict[str, list], uploaded: dict[str, int],
              data_dirs: dict[str, str], default_config: str, extra: dict[str, Any]):
    """`DatasetCardData` with `configs` and `dataset_info` as push_to_hub writes them, plus `extra`."""
    from datasets.info import DatasetInfo, DatasetInfosDict
    from datasets.splits import SplitDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    card_data = DatasetCardData(**extra)
    infos, configs = {}, {}
    for config, split_infos in splits_by_config.items():
        info = DatasetInfo(config_name=config, features=features_by_config[config], splits=SplitDict(),
                           download_size=0, dataset_size=0)
        for split_info in split_infos:
            info.splits.add(split_info)
            info.dataset_size += split_info.num_bytes
        info.download_size = uploaded[config]
        info.size_in_bytes = info.download_size + info.dataset_size
        infos[config] = info
        entry: dict[str, Any] = {"data_files": [{"split": s.name, "path": f"{data_dirs[config]}/{s.name}-*"}
                                                for s in split_infos]}
        if config == default_config and config != "default":
            entry["default"] = True
        configs[config] = entry
    DatasetInfosDict(infos).to_dataset_card_data(card_data)
    MetadataConfigs(configs).to_dataset_card_data(card_data)
    return card_data


def write_plan(plan: Plan, out: str | os.PathLike[str], *, repo_id: str | None = None, overwrite: bool = False,
               progress: bool = True) -> dict[str, Any]:
    """Write every config of `plan` to `out` (README.md, parquet shards, build_report.json).

    Written into a staging folder next to `out` and moved into place at the end: a failed or
    interrupted build leaves any earlier `out` as it was. Returns the build report (with
    statistics and the files written)."""
    from datasets import disable_caching, enable_caching, is_caching_enabled
    from huggingface_hub import DatasetCard

    from amdkv.data import cards
    from amdkv.data.stats import plan_statistics

    out = Path(out)
    if out.exists() and not overwrite:
        raise BadInputError(f"{out} exists", hint="pass --overwrite to replace it (it is replaced only once the new "
                                                  "build is complete), or choose another --out")
    configs = plan.configs()
    if not configs:
        raise BadInputError(f"nothing to write: every record was filtered out ({_removed_summary(plan)})",
                            hint="check the records (amdkv records stats DIR) and the policy (--select, --platforms)")
    if plan.spec.default_config not in configs:
        raise BadInputError(f"the default config {plan.spec.default_config!r} has no rows, so load_dataset without a "
                            f"config name would fail (configs with rows: {', '.join(configs)})",
                            hint="add records for it or loosen the policy (--select all)")
    # The plan's many small objects live until the end: keep the cyclic garbage collector from
    # walking them again and again while rows are made (measured: seconds per full collection).
    gc.freeze()
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    cache = out.parent / f".{out.name}.cache-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    caching = is_caching_enabled()
    try:
        enable_caching()
        split_infos, uploaded, data_dirs, files = {}, {}, {}, []
        for config in configs:
            data_dirs[config] = data_dir_for(config, plan.spec.default_config)
            split_infos[config], uploaded[config] = [], 0
            for split in plan.splits(config):
                dataset = build_split(plan, config, split, cache, progress=progress)
                with datasets_progress(progress):
                    info, size, paths = write_parquet_shards(dataset, staging, data_dirs[config], split,
                                                             plan.policy.max_shard_size)
                split_infos[config].append(info)
                uploaded[config] += size
                files += paths
                del dataset  # unmap its Arrow file before the next split
                plan.report.peak_rss_mib[f"write {config}/{split}"] = peak_rss_mib()
        stats = plan_statistics(plan)
        card_data = card_yaml({c: plan.features(c) for c in configs}, split_infos, uploaded, data_dirs,
                              plan.spec.default_config, cards.card_metadata(plan, stats))
        body = cards.render_body(plan, stats, repo_id or f"amdkv/{plan.spec.name}")
        card = DatasetCard(f"---\n{card_data.to_yaml()}\n---\n{body}")
        (staging / README).write_text(str(card), encoding="utf-8")
        report = {**plan.report.to_dict(), "statistics": stats, "files": sorted(files + [README, REPORT_FILE])}
        (staging / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        _replace(staging, out)
        return report
    finally:
        gc.unfreeze()
        if not caching:
            disable_caching()
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)


def _replace(staging: Path, out: Path) -> None:
    """Move the finished build into place; an old `out` is removed only after the move."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    os.replace(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _removed_summary(plan: Plan) -> str:
    return "; ".join(f"{p.name}: {p.removed}" for p in plan.report.phases if p.removed) or "no records"


# ------------------------------------------------------------------------------ reading a folder
def read_layout(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """Configs of a Hub-layout folder from its README YAML: {config: {"data_files": {split:
    [paths]}, "default": bool, "features": Features | None}}. Checks that every pattern matches a
    file and that the default config exists; raises BadInputError naming what is missing."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    folder = Path(folder)
    readme = folder / README
    if not readme.is_file():
        raise BadInputError(f"{folder} has no {README}", hint="build it with `amdkv build ... --out DIR`")
    data = DatasetCard.load(readme).data
    metadata = MetadataConfigs.from_dataset_card_data(data)
    infos = DatasetInfosDict.from_dataset_card_data(data)
    if not metadata:
        raise BadInputError(f"{readme} has no `configs` in its YAML", hint="rebuild it with `amdkv build`")
    default = metadata.get_default_config_name()
    if default is None:
        raise BadInputError(f"{readme} names no default config", hint="rebuild it with `amdkv build`")
    layout: dict[str, Any] = {}
    for config, entry in metadata.items():
        files: dict[str, list[str]] = {}
        for item in entry.get("data_files", []):
            patterns = item["path"] if isinstance(item["path"], list) else [item["path"]]
            matched = sorted(str(p.relative_to(folder)) for pattern in patterns for p in folder.glob(pattern))
            if not matched:
                raise BadInputError(f"config {config!r} split {item['split']!r}: no file matches {patterns} in {folder}",
                                    hint="the folder is incomplete: rebuild it, or restore the missing shards")
            files[item["split"]] = matched
        info = infos.get(config)
        layout[config] = {"data_files": files, "default": config == default,
                          "features": info.features if info is not None else None}
    return layout


def check_layout(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """`read_layout` plus: every parquet shard opens and its schema carries the README's features."""
    import pyarrow.parquet as pq
    from datasets import Features

    folder = Path(folder)
    layout = read_layout(folder)
    for config, entry in layout.items():
        for split, paths in entry["data_files"].items():
            for path in paths:
                try:
                    schema = pq.read_schema(folder / path)
                except Exception as exc:  # noqa: BLE001 - any unreadable shard is reported the same way
                    raise BadInputError(f"{folder / path} is not a readable parquet file: {exc}",
                                        hint="rebuild the dataset (amdkv build) or restore the shard") from exc
                if entry["features"] is not None:
                    with contextlib.suppress(KeyError, ValueError):
                        stored = Features.from_arrow_schema(schema)
                        if stored != entry["features"]:
                            raise BadInputError(f"{path}: its columns differ from the README's features for {config!r}",
                                                hint="a shard from another build is in the folder: rebuild it")
    return layout
