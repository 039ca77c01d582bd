"""Verdict cache: the verdict of an identical verification is reused instead of run again.

GRPO groups and agent loops submit many identical completions; a corpus rebuild re-verifies the
same rows. The key is everything a verdict depends on: the task (id, source hash, suite version),
the candidate's sha256 and language, the platform and device, and a hash of the verifier's own
identity (amdkv version and git commit, torch and triton versions, the verdict-affecting settings
of `VerifierConfig.verdict_settings()`). Only a changed input, verifier or setting misses.

Decisions:
- `infra_error` verdicts are never stored (the harness failed; the next try must run again), nor
  verdicts made with the static checks skipped (AMDKV_UNSAFE_SKIP_STATIC_CHECKS, test only).
- One JSON file per key under `<cache_dir>/verdicts/ab/<key>.json`, written to a temp file and
  renamed: many processes (an `amdkv serve`, several eval runs) may share the folder with no lock
  and a reader never sees half a file. A corrupt file is a miss (and is replaced).
- A hit is a copy with `cache_hit=True` and the key; its timings and env are those of the run that
  produced it (the verdict says so through `cache_hit`).
- The git commit is that of HEAD: uncommitted edits to the verifier do not change the key; set
  `verdict_cache=False` (AMDKV_VERDICT_CACHE=0) while developing the verifier itself.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from amdkv.verify.verdict import INFRA_ERROR, Verdict

CACHE_FORMAT = 1


@functools.lru_cache(maxsize=1)
def _library_identity() -> dict[str, Any]:
    import torch
    import triton

    import amdkv
    from amdkv.env import git_hash, source_hash

    return {"amdkv": amdkv.__version__, "git": git_hash(), "source": source_hash(), "torch": torch.__version__,
            "triton": triton.__version__}


def verifier_identity(verdict_settings: dict[str, Any], platform: str, device: str) -> str:
    """Hash of what the verifier is (versions) and how it is set (verdict-affecting settings)."""
    blob = json.dumps({"lib": _library_identity(), "settings": verdict_settings, "platform": platform,
                       "device": device, "format": CACHE_FORMAT}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def verdict_key(*, task_id: str, task_source_hash: str, suite_version: str | None, candidate_sha256: str,
                language: str, identity: str) -> str:
    blob = json.dumps({"task": task_id, "task_source": task_source_hash, "suite_version": suite_version,
                       "candidate": candidate_sha256, "language": language, "verifier": identity},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class VerdictCache:
    """Files of cached verdicts under `root` (disabled: every get misses, nothing is written)."""

    def __init__(self, root: str | os.PathLike[str], enabled: bool = True) -> None:
        self.root = Path(root)
        self.enabled = enabled

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            verdict = Verdict.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError):  # corrupt or from another schema: a miss, rewritten
            return None
        verdict.cache_hit, verdict.cache_key = True, key
        return verdict

    def put(self, key: str, verdict: Verdict) -> None:
        if not self.enabled or verdict.status == INFRA_ERROR:
            return
        if str((verdict.env or {}).get("static_checks", "on")).startswith("skipped"):
            return  # made with the test-only switch: never reused (and its key differs anyway)
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = dict(verdict.to_dict(), cache_hit=False, cache_key=key)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(data, fh, allow_nan=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):  # the temp file is already gone
                os.unlink(tmp)
            raise
