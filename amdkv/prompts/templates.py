"""Versioned prompt templates: `templates/<version>/*.md` (+ `hints.json`), rendered with `string.Template`.

Every text a model reads lives in these files, so a prompt change is a diff of text files and a
new version folder, never an edit hidden in code. A released version is frozen: its fingerprint
(sha256 over file names and contents) is listed in `RELEASED`, and a test fails when a released
folder changes. Change prompts by copying the folder to the next version, editing the copy and
bumping `PROMPT_VERSION`; records keep the version they were generated with, so old data stays
interpretable and can be re-rendered exactly.

Placeholders are `$name`; rendering fails on a missing one (`string.Template.substitute`), so a
template and the code that fills it cannot silently drift apart.
"""

from __future__ import annotations

import functools
import hashlib
import json
import string
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError

PROMPT_VERSION = "v1"
TEMPLATES_ROOT = Path(__file__).resolve().parent / "templates"
# Fingerprints of released versions (`fingerprint(version)`); a released folder never changes.
RELEASED = {
    "v1": "0e271c8c12d5a2cf",
}
# The framing amdkv puts around a benchmark's own instructions (amdkv.prompts.benchmark): one folder per
# prompt version under `_benchmark/` (not itself a version: `available_versions` skips `_` folders),
# frozen with its version; a new version copies it too.
BENCHMARK_FOLDER = "_benchmark"
RELEASED_BENCHMARK = {
    "v1": "ecd4ee3f0dcbf8d8",
}


def benchmark_templates(version: str = PROMPT_VERSION) -> str:
    """The template "version" (folder) that holds the benchmark framing of prompt `version`."""
    return f"{BENCHMARK_FOLDER}/{version}"


def available_versions() -> list[str]:
    return sorted(p.name for p in TEMPLATES_ROOT.iterdir() if p.is_dir() and not p.name.startswith("_"))


@functools.lru_cache(maxsize=None)
def _files(version: str) -> dict[str, str]:
    folder = TEMPLATES_ROOT / version
    if not folder.is_dir():
        raise BadInputError(f"unknown prompt version {version!r}",
                            hint=f"use one of {', '.join(available_versions())} (current: {PROMPT_VERSION})")
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir()) if p.is_file()}


def fingerprint(version: str = PROMPT_VERSION) -> str:
    """sha256 over the version's file names and contents (first 16 hex digits)."""
    h = hashlib.sha256()
    for name, text in _files(version).items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    return h.hexdigest()[:16]


def render(name: str, version: str = PROMPT_VERSION, **fields: Any) -> str:
    """Template `name` (without `.md`) of `version` with `fields` substituted; trailing space trimmed."""
    files = _files(version)
    try:
        text = files[f"{name}.md"]
    except KeyError:
        raise BadInputError(f"prompt version {version} has no template {name!r}",
                            hint=f"templates: {', '.join(sorted(n[:-3] for n in files if n.endswith('.md')))}") from None
    try:
        return string.Template(text).substitute({k: str(v) for k, v in fields.items()}).strip() + "\n"
    except KeyError as exc:  # a template asks for a field the code did not give: a bug, said plainly
        raise BadInputError(f"template {version}/{name}.md needs the field {exc.args[0]!r}",
                            hint="pass it to render(); templates and their callers must agree") from None


def hint(kind: str, code: str | None, version: str = PROMPT_VERSION) -> str:
    """The one-sentence hint for an extraction reason or verdict reason (empty when there is none)."""
    table = json.loads(_files(version).get("hints.json", "{}"))
    return table.get(kind, {}).get(code or "", "")
