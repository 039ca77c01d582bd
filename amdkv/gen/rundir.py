"""The run folder's manifest, shared by `amdkv gen {triton,hip}` and `amdkv gen rocm-qa`.

`OUT/manifest.json` holds the run's identity (every setting that decides what is generated) and
its hash, the run key, which every record's origin carries; each invocation is appended. A
re-run with another identity is refused, so one folder never mixes two runs' records.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from amdkv.errors import BadInputError

MANIFEST = "manifest.json"
RUN_FORMAT = "amdkv-gen-run"


def open_manifest(out: Path, identity: Mapping[str, Any], invocation: Mapping[str, Any]) -> str:
    """Create or check OUT/manifest.json and record this invocation; returns the run key."""
    out.mkdir(parents=True, exist_ok=True)
    identity = json.loads(json.dumps(identity, sort_keys=True, default=str))
    run_key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    path = out / MANIFEST
    entry = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "amdkv": _amdkv_version(), **invocation}
    if path.exists():
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise BadInputError(f"{path} is unreadable: {exc}", hint="restore it or use a new --out folder") from exc
        if manifest.get("format") != RUN_FORMAT:
            raise BadInputError(f"{out} is not an `amdkv gen` run folder", hint="use a new or empty --out folder")
        if manifest["run_key"] != run_key:
            diff = sorted(k for k in set(identity) | set(manifest["identity"])
                          if identity.get(k) != manifest["identity"].get(k))
            raise BadInputError(f"{out} holds a run with other settings ({', '.join(diff)} differ)",
                                hint="re-run with the same settings to resume it, or pass a new --out folder")
        manifest["invocations"].append(entry)
    else:
        if any(out.iterdir()):
            raise BadInputError(f"{out} is not empty and has no {MANIFEST}", hint="use a new or empty --out folder")
        manifest = {"format": RUN_FORMAT, "version": 1, "run_key": run_key, "identity": identity,
                    "invocations": [entry]}
    write_json(path, manifest)
    return run_key


def _amdkv_version() -> str:
    import amdkv

    return amdkv.__version__


def write_json(path: Path, data: Any) -> None:
    """Atomically (temp file + rename): a kill leaves the old file or the new one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
