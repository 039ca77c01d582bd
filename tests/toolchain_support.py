"""The one skip rule for tests that need the real AMD compiler (hipcc 7 from the Debian sid chroot,
`make toolchain-hip`; CI installs it). Without it such tests are skipped with that reason, never
passed, so a machine without the chroot still runs the rest of the suite honestly."""

from __future__ import annotations

from typing import Any

import pytest


def require_hipcc(*archs: str) -> Any:
    """The first located hipcc that compiles for every arch in `archs` (default gfx942 and gfx950,
    the archs only hipcc 7 has), else skip the calling test."""
    from amdkv.toolchain.locate import find_toolchains

    wanted = set(archs or ("gfx942", "gfx950"))
    for tc in find_toolchains():
        if wanted <= set(tc.archs):
            return tc
    pytest.skip("hipcc 7 toolchain not installed: run `make toolchain-hip`")
