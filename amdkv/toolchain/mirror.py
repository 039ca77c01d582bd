"""Find the Debian mirror this machine's own apt already uses.

Why: the sid chroot must come from the same mirror the machine is allowed to reach (CI and the
development machines reach Debian's packages only through their configured mirror), so the host
is read from apt's configuration instead of being written into the code.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from amdkv.toolchain.errors import ToolchainError

DEB822_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
ONE_LINE_SOURCES = Path("/etc/apt/sources.list")


def _from_deb822(text: str) -> str | None:
    """First `URIs:` of a stanza that serves the main archive (not -security)."""
    for stanza in re.split(r"\n\s*\n", text):
        uris = re.search(r"^URIs:\s*(\S+)", stanza, re.M)
        suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
        if not uris:
            continue
        if suites and all(s.endswith("-security") for s in suites.group(1).split()):
            continue
        if "security" in uris.group(1):
            continue
        return uris.group(1).rstrip("/")
    return None


def _from_one_line(text: str) -> str | None:
    for line in text.splitlines():
        m = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
        if m and "security" not in m.group(1) and not m.group(2).endswith("-security"):
            return m.group(1).rstrip("/")
    return None


def debian_mirror() -> str:
    """The Debian mirror URL (env `AMDKV_DEBIAN_MIRROR` overrides apt's configuration)."""
    from amdkv.config import ToolchainConfig

    env = ToolchainConfig.from_env().debian_mirror
    if env:
        return env.rstrip("/")
    for path, parse in ((DEB822_SOURCES, _from_deb822), (ONE_LINE_SOURCES, _from_one_line)):
        if path.is_file():
            found = parse(path.read_text(errors="replace"))
            if found:
                return found
    raise ToolchainError(
        f"could not find a Debian mirror in {DEB822_SOURCES} or {ONE_LINE_SOURCES}",
        hint="set AMDKV_DEBIAN_MIRROR to the Debian mirror URL this machine can reach "
             "(e.g. the URIs: line of your apt sources)")
