"""Verification past one machine: `RayVerifier` over a Ray cluster, and the one function every
command opens its verifier with (`open_run_verifier`), so `amdkv eval`, `amdkv gen` and
`amdkv reverify` take `--ray [ADDRESS]` the same way (docs/ray.md).

Why a package of its own and not `amdkv.verify`: the verifier's modules import only the standard
library, torch, triton and numpy (DESIGN.md), and Ray is an optional extra (`amdkv[ray]`).
Importing this package imports neither Ray nor torch; Ray loads only when `--ray` is given.
"""

from __future__ import annotations

from typing import Any

from amdkv.cluster.options import RAY_EXTRA_HINT


def open_run_verifier(config: Any, *, ray_address: str | None = None, platform: Any = None) -> Any:
    """The verifier a command runs with: with `ray_address` (`auto`, `local` or `HOST:PORT`) a
    `RayVerifier` with one verification actor per node of that cluster, each opening
    `open_verifier(config)` on its own GPUs (or cpu); without it the local `open_verifier(config)`,
    exactly as before (Ray is not imported). `platform`: the local platform if already detected."""
    if ray_address:
        from amdkv.cluster.ray_verifier import RayVerifier

        return RayVerifier(ray_address, config)
    from amdkv.verify.scheduler import open_verifier

    return open_verifier(config, platform=platform)


__all__ = ["open_run_verifier", "RAY_EXTRA_HINT"]
