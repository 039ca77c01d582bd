"""The `--ray [ADDRESS]` option, declared once for `amdkv eval`, `amdkv gen` and `amdkv reverify`.

click only: the option is parsed without importing Ray.
"""

from __future__ import annotations

from typing import Any, Callable

import click

RAY_EXTRA_HINT = 'install it with: pip install "amdkv[ray]" (Ray 2.60 on every node of the cluster)'

RAY_HELP = ("verify on a Ray cluster, one verification actor per node (docs/ray.md): --ray alone or "
            "--ray auto joins the cluster this machine is part of (`ray start`), --ray HOST:PORT a given one, "
            "--ray local starts a one-machine cluster; --device/--jobs/--trials/--timeout then apply on every node")


def ray_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--ray` with an optional value: absent = no Ray, `--ray` = `auto`."""
    return click.option("--ray", "ray_address", is_flag=False, flag_value="auto", default=None,
                        metavar="[ADDRESS]", help=RAY_HELP)(fn)


def check_one_verifier_source(verifier_url: str | None, ray_address: str | None) -> None:
    """A run verifies on one thing: a service, a Ray cluster, or this machine."""
    if verifier_url and ray_address:
        raise click.UsageError("--verifier-url and --ray both name where to verify: give one of them")
