"""The one skip rule for tests that need parts of the OS sandbox (Landlock, seccomp, namespaces): on a
kernel that does not apply them such tests are skipped with the parts it lacks and why (`amdkv env`
says the same), never passed."""

from __future__ import annotations

import pytest

from amdkv.verify import os_sandbox

CAPS = os_sandbox.capabilities()
APPLIED = set(CAPS.get("applied", []))


def require_sandbox_parts(*parts: str) -> None:
    """Skip the calling test unless this machine's kernel applies every one of `parts`."""
    missing = [p for p in parts if p not in APPLIED]
    if missing:
        pytest.skip(f"this machine's kernel lacks sandbox part(s) {missing}: {CAPS.get('missing')}")
