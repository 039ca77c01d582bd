"""`amdkv build`, `amdkv publish`, `amdkv reverify` and `amdkv records`: the data stage's commands.

Registered on the main group by `register(main)` (amdkv/cli.py). Only click is imported here;
datasets, datasketch and huggingface_hub load inside the commands.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from amdkv.cluster.options import ray_option
from amdkv.errors import EXIT_INFRA, EXIT_OK


def register(main: click.Group) -> None:
    for command in (build, publish_cmd, reverify_cmd, records):
        main.add_command(command)


def _csv(text: str | None) -> tuple[str, ...] | None:
    return tuple(p.strip() for p in text.split(",") if p.strip()) if text else None


# ------------------------------------------------------------------------------------ build
@click.command()
@click.argument("dataset", type=click.Choice(["hip", "triton", "rocm-qa"]))
@click.option("--records", "records_dir", required=True, type=click.Path(file_okay=False),
              help="the record store (written by generation, `amdkv demo --records`, `amdkv reverify`)")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="the Hub-layout folder to write")
@click.option("--overwrite", is_flag=True, help="replace --out (only once the new build is complete)")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, exists=True),
              help="a YAML/JSON file of BuildPolicy settings (options below override it)")
@click.option("--select", type=click.Choice(["correct", "faster", "all"]), help="which samples (default: correct)")
@click.option("--min-speedup", type=float, help="with --select faster: the least speedup (default 1.0)")
@click.option("--platforms", help="verdict platforms to keep, e.g. rocm or cuda,rocm (default: all found)")
@click.option("--pairs", type=click.Choice(["parent", "task", "both", "none"]), help="optimisation pairs (default: both)")
@click.option("--min-gain", type=float, help="least speedup gain of an optimisation pair (default 1.1)")
@click.option("--decontaminate", "decontaminate", multiple=True,
              help="eval suite spec to decontaminate against (repeatable; default: builtin:eval)")
@click.option("--splits", help="split shares, e.g. train=0.95,test=0.05")
@click.option("--seed", type=int, help="split and row-order seed (default 0)")
@click.option("--config", "configs", multiple=True, help="build only this config (repeatable)")
@click.option("--repo-id", default=None, help="the repo id the card's examples name (default amdkv/<dataset>)")
@click.option("--workers", type=int, default=None, help="processes reading records (default: 2)")
@click.option("--json", "as_json", is_flag=True, help="print the build report as JSON")
def build(dataset: str, records_dir: str, out_dir: str, overwrite: bool, policy_file: str | None, select: str | None,
          min_speedup: float | None, platforms: str | None, pairs: str | None, min_gain: float | None,
          decontaminate: tuple[str, ...], splits: str | None, seed: int | None, configs: tuple[str, ...],
          repo_id: str | None, workers: int | None, as_json: bool) -> None:
    """Build DATASET (hip, triton or rocm-qa) from a record store into a Hub-layout folder.

    \b
    amdkv build triton --records runs/triton --out build/amdkv-triton
    python -c "from datasets import load_dataset; print(load_dataset('build/amdkv-triton'))"
    """
    from amdkv.data.api import build_dataset, load_policy
    from amdkv.data.policy import parse_splits

    overrides: dict[str, Any] = {"select": select, "min_speedup": min_speedup, "platforms": _csv(platforms),
                                 "pairs": pairs, "min_gain": min_gain, "decontaminate": decontaminate or None,
                                 "splits": parse_splits(splits) if splits else None, "seed": seed,
                                 "configs": configs or None}
    policy = load_policy(policy_file, {k: v for k, v in overrides.items() if v is not None})
    report = build_dataset(dataset, records_dir, out_dir, policy=policy, overwrite=overwrite, repo_id=repo_id,
                           workers=workers, progress=not as_json)
    if as_json:
        click.echo(json.dumps(report, indent=2, sort_keys=True))
    else:
        print_build_report(report, out_dir)


def print_build_report(report: dict[str, Any], out_dir: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"amdkv build {report['dataset']} -> {out_dir}")
    table.add_column("step")
    table.add_column("removed", justify="right")
    table.add_column("detail")
    # the counts in go in the detail column, not under "removed"; the phases remove units (each turn
    # of a trajectory is one, besides the trajectory), so the units in are what their removals add up to
    kinds = ", ".join(f"{k} {v:,}" for k, v in report["records_by_kind"].items())
    table.add_row("records in", "", f"{report['records']:,} ({kinds})")
    units = report.get("units_in") or {}
    if units:
        table.add_row("units in", "", f"{sum(units.values()):,} ("
                      + ", ".join(f"{k} {v:,}" for k, v in units.items()) + "); the steps below remove units")
    for phase in report["phases"]:
        table.add_row(phase["name"], f"{phase['removed']:,}", "; ".join(f"{k}: {v:,}" for k, v in phase["detail"].items()))
    if report.get("pairs"):
        table.add_row("optimisation pairs", "", f"{report['pairs'].get('found', 0):,} formed")
    for config, splits in report["rows"].items():
        written = ", ".join(f"{s} {n:,}" for s, n in splits.items()) if any(splits.values()) else "no rows: not written"
        table.add_row(f"rows out: {config}", "", written)
    clusters = report.get("clusters") or {}
    table.add_row("clusters", "", f"{clusters.get('clusters', 0):,} (largest {clusters.get('largest', 0):,} tasks)")
    Console().print(table)


# ------------------------------------------------------------------------------------ publish
@click.command("publish")
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
@click.option("--repo-id", required=True, help="ORG/NAME of the dataset repo")
@click.option("--private", is_flag=True, help="create the repo private")
@click.option("--dry-run", is_flag=True, help="check the folder and list what would be uploaded; call nothing")
@click.option("--json", "as_json", is_flag=True)
def publish_cmd(folder: str, repo_id: str, private: bool, dry_run: bool, as_json: bool) -> None:
    """Upload a built dataset FOLDER to the Hugging Face Hub (HfApi.create_repo + upload_folder)."""
    from amdkv.data.publish import publish

    result = publish(folder, repo_id, private=private, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    title = f"{'would upload' if dry_run else 'uploaded'} {folder} -> datasets/{repo_id}" + (" (private)" if private else "")
    table = Table(title=title)
    table.add_column("file")
    table.add_column("bytes", justify="right")
    for f in result["files"]:
        table.add_row(f["path"], f"{f['bytes']:,}")
    Console().print(table)
    click.echo(f"configs: {', '.join(result['configs'])} (default {result['default_config']}); "
               f"stale files under {', '.join(result['delete_patterns'])} are deleted in the same commit")
    if not dry_run:
        click.echo(f"commit: {result.get('commit_url') or result.get('commit')}")


# ------------------------------------------------------------------------------------ reverify
@click.command("reverify")
@click.argument("dataset")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="record store for the new verdicts (resumable; buildable with amdkv build --records)")
@click.option("--config", default=None, help="config to read (default: the dataset's default)")
@click.option("--split", default=None, help="only this split")
@click.option("--limit", type=int, default=None, help="at most this many programs")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda", "rocm"]))
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="programs verified at once")
@ray_option
@click.option("--json", "as_json", is_flag=True)
def reverify_cmd(dataset: str, out_dir: str, config: str | None, split: str | None, limit: int | None, device: str,
                 jobs: int, ray_address: str | None, as_json: bool) -> None:
    """Verify DATASET's programs again on this machine (a built folder, a repo id, or KernelBook-layout files)."""
    from amdkv.config import VerifierConfig
    from amdkv.data.reverify import reverify

    summary = reverify(dataset, out_dir, config=config, split=split, limit=limit,
                       verifier_config=VerifierConfig.from_env(device=device, jobs=jobs), progress=not as_json,
                       ray_address=ray_address)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"reverify {dataset}: {summary['programs']:,} programs, agreement "
                            f"{(summary['agreement'] or 0):.1%} (platforms {summary['platforms']})")
        for col in ("old status@platform", "new status", "programs"):
            table.add_column(col)
        for t in summary["transitions"]:
            table.add_row(t["old"], t["new"], f"{t['count']:,}")
        Console().print(table)
        if summary["unsupported"]:
            click.echo(f"{len(summary['unsupported'])} row(s) could not be adapted; see {out_dir}/reverify_summary.json")
    sys.exit(EXIT_INFRA if any(t["new"] == "infra_error" for t in summary["transitions"]) else EXIT_OK)


# ------------------------------------------------------------------------------------ records
@click.group()
def records() -> None:
    """Inspect record stores."""


@records.command("stats")
@click.argument("folder", type=click.Path(file_okay=False, exists=True))
@click.option("--json", "as_json", is_flag=True)
def records_stats(folder: str, as_json: bool) -> None:
    """Records, kinds, shards and torn tails of a record store (or of an `amdkv gen` run folder's)."""
    from amdkv.data.store import open_store

    stats = open_store(folder).stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
    else:
        for key, value in stats.items():
            click.echo(f"{key:<20} {value}")
