"""`amdkv toolchain ...`: install and inspect the AMD compilers (click group `toolchain_group`)."""

from __future__ import annotations

import json
import sys

import click

from amdkv.errors import AmdkvError


@click.group("toolchain")
def toolchain_group() -> None:
    """Install and inspect compilers for AMD targets (hipcc for gfx90a/gfx942/gfx950)."""


@toolchain_group.command("install")
@click.argument("which", type=click.Choice(["hip"]))
@click.option("--torch-ext", is_flag=True, help="Also install rocThrust and Python headers (full torch-extension compiles).")
@click.option("--force", is_flag=True, help="Reinstall the packages even if the manifest says they are there.")
@click.option("--dir", "root", type=click.Path(), default=None, help="Chroot location (default $AMDKV_TOOLCHAIN_DIR or ~/.cache/amdkv/toolchains/hip-sid).")
def install_cmd(which: str, torch_ext: bool, force: bool, root: str | None) -> None:
    """Set up hipcc 7.x in a Debian sid chroot (idempotent; needs root)."""
    from amdkv.toolchain.install import install_hip_toolchain

    try:
        manifest = install_hip_toolchain(root, torch_ext=torch_ext, force=force)
    except AmdkvError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(e.exit_code)
    click.echo(f"hipcc: {manifest['hipcc_version']} at {manifest['root']} (archs: {', '.join(manifest['archs'])})")


@toolchain_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(as_json: bool) -> None:
    """Show every hipcc found and the AMD archs it compiles for."""
    from amdkv.toolchain.locate import find_toolchains

    found = find_toolchains()
    if as_json:
        click.echo(json.dumps([t.to_dict() for t in found], indent=1))
        return
    if not found:
        click.echo("no hipcc found: run `amdkv toolchain install hip` (as root)")
        sys.exit(1)
    for t in found:
        click.echo(f"{t.kind:10s} {t.hipcc}  {t.version}  archs: {', '.join(t.archs)}"
                   + (f"  root: {t.root}" if t.root else ""))
