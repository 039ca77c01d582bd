"""`amdkv cache info / prune`: what the verifier's cache holds, and freeing its reference entries without
breaking running verifications (cache_usage.py). Imports click only until a command runs."""

from __future__ import annotations

import json

import click


def _size(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _cache_dir(cache_dir: str | None) -> str:
    from amdkv.config import VerifierConfig

    return cache_dir or str(VerifierConfig.from_env().cache_path)


@click.group("cache")
def cache_group() -> None:
    """Inspect and prune the verifier's cache (AMDKV_CACHE_DIR)."""


@cache_group.command("info")
@click.option("--cache-dir", default=None, help="the cache folder (default: AMDKV_CACHE_DIR, else ~/.cache/amdkv)")
@click.option("--json", "as_json", is_flag=True, help="print the sizes as JSON")
def cache_info(cache_dir: str | None, as_json: bool) -> None:
    """Size of each part of the cache, the reference entries, and the free disk there."""
    from amdkv.verify.cache_usage import cache_usage

    usage = cache_usage(_cache_dir(cache_dir))
    if as_json:
        click.echo(json.dumps(usage.to_dict(), indent=2))
        return
    click.echo(f"cache {usage.cache_dir}: {_size(usage.total_bytes)} in all, {_size(usage.free_bytes)} free on its disk")
    if not usage.parts:
        click.echo("  (empty or missing)")
    for part in usage.parts:
        extra = f", {usage.reference_entries} entries" if part.name == "refs" else ""
        click.echo(f"  {part.name + '/':15s} {_size(part.bytes):>11s}  {part.files} files{extra}: {part.about}")


@cache_group.command("prune")
@click.option("--refs-gib", type=click.FloatRange(min=0), required=True,
              help="keep at most this many GiB of reference entries, least recently used removed first "
                   "(0: every entry no verification is using)")
@click.option("--cache-dir", default=None, help="the cache folder (default: AMDKV_CACHE_DIR, else ~/.cache/amdkv)")
@click.option("--json", "as_json", is_flag=True, help="print what was removed as JSON")
def cache_prune(refs_gib: float, cache_dir: str | None, as_json: bool) -> None:
    """Remove reference entries down to --refs-gib. Safe while verifiers run: an entry any verification
    holds is kept (and said), and a removed one is recomputed, to the same values, when next needed."""
    from amdkv.verify.cache_usage import count_reference_entries, prune_references

    folder = _cache_dir(cache_dir)
    removed, left = prune_references(folder, refs_gib)
    kept = count_reference_entries(folder)  # refs/ only: not the whole cache's walk `info` makes
    freed = sum(n for _, n in removed)
    if as_json:
        click.echo(json.dumps({"cache_dir": folder, "removed": [{"key": k, "bytes": n} for k, n in removed],
                               "freed_bytes": freed, "entries_left": kept, "refs_bytes_left": left}, indent=2))
        return
    click.echo(f"removed {len(removed)} reference entries ({_size(freed)}); {kept} left ({_size(left)})")
    if kept and left > refs_gib * 2**30:
        click.echo(f"  {kept} entries are in use by running verifications (or were written meanwhile): kept")
