"""The verifier's temp folders carry the pid of the process that made them, so that a fork server
whose parent died can find every one of them, whenever the parent made it.

Why: a killed parent's folders were removed only if the fork server had been told about them (a
worker's folder in its fork request, the candidate scratch in an `own` message). A folder made
between `mkdtemp` and that message, when the parent was SIGKILLed in that window, stayed behind:
the crash test saw `amdkv-worker-*` and `amdkv-candidates-*` left over in about one run of ten
(2026-12-05). With the parent's pid in the name the server removes them all by name, once the
parent is really gone (it has been re-parented); a parent that is alive removes its own. Standard
library only: the fork server imports it.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile


def make_temp_folder(kind: str, base: str | None = None) -> str:
    """`mkdtemp` named `amdkv-<kind>-<this pid>-XXXX` (in `base`, default the temp folder)."""
    return tempfile.mkdtemp(prefix=f"amdkv-{kind}-{os.getpid()}-", dir=base)


def folders_of(pid: int, base: str | None = None) -> list[str]:
    """Every verifier temp folder the process `pid` made in `base` (default the temp folder)."""
    root = base or tempfile.gettempdir()
    return sorted(p for p in glob.glob(os.path.join(glob.escape(root), f"amdkv-*-{pid}-*")) if os.path.isdir(p))


def remove_folders_of(pid: int, base: str | None = None) -> list[str]:
    """Remove what `folders_of` finds; the folders removed."""
    found = folders_of(pid, base)
    for folder in found:
        shutil.rmtree(folder, ignore_errors=True)
    return found
