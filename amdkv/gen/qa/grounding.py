"""Is a question-answer pair grounded in the code it cites? And the source trees it may cite.

A pair cites one file and an inclusive line range. It is kept only when (reasons for dropping, in
the order checked):

- `file_missing`: the file exists in the tree (a relative path that stays inside the tree);
- `lines_out_of_range`: 1 <= line_start <= line_end <= the file's length;
- `span_too_wide`: the range is at most `max_span` lines (citing a whole file grounds nothing);
- `no_identifiers`: the answer names at least one code identifier (the pair's `identifiers` list
  and every identifier-looking token in the answer: backticked spans, `snake_case`, `camelCase`,
  `Qualified::names`, `calls()`; file paths in prose are not names); a pair that names nothing
  cannot be checked;
- `identifier_missing`: every identifier named occurs, as a whole word, in the cited lines (for
  `a::b::c` the last part `c`, since qualifiers usually sit elsewhere).

"At that commit": the tree is the checkout the chunks came from; the record keeps its commit (git
HEAD, the Debian source version, or a content hash of the tree) and the cited file's sha256, so
the check can be repeated later on the same bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from amdkv.errors import BadInputError
from amdkv.gen.qa.chunker import file_sha256, iter_source_files

DEFAULT_MAX_SPAN = 80
GROUNDING_REASONS = ("ok", "file_missing", "lines_out_of_range", "span_too_wide", "no_identifiers",
                     "identifier_missing")

_BACKTICK = re.compile(r"`([^`\n]{1,120})`")
_IDENT_IN_CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_~][A-Za-z0-9_]*)*")
_CODE_WORD = re.compile(r"(?<![\w:])(?:[A-Za-z_][A-Za-z0-9_]*::)+[A-Za-z_~][A-Za-z0-9_]*"   # qualified
                        r"|(?<![\w:])_*[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]+"                      # snake_case
                        r"|(?<![\w:])[a-z]+[A-Z][A-Za-z0-9]*"                                   # camelCase
                        r"|(?<![\w:])[A-Za-z_][A-Za-z0-9_]*(?=\(\))")                          # call()
# file paths and file names in prose ("see library/src/rocblas_axpy.cpp") are not identifiers
_PATH = re.compile(r"\S*[/\\]\S*|\S+\.(?:h|hh|hpp|hxx|inl|ipp|c|cc|cpp|cxx|hip|cu|cuh|txt|md|py|cmake|yaml)\b")
_KEYWORDS = {"const", "int", "float", "double", "void", "char", "bool", "auto", "template", "typename", "class",
             "struct", "return", "if", "else", "for", "while", "static", "inline", "unsigned", "size_t", "true",
             "false", "nullptr", "this", "std", "operator", "the", "a", "an", "and", "or", "of", "to", "in", "is"}


@dataclasses.dataclass(frozen=True)
class SourceTree:
    """A library's source tree: `library` name, `root`, `commit` (see the module docstring),
    `licence` (SPDX id where recognised) and `provenance` (where the tree came from)."""

    root: Path
    library: str
    commit: str
    licence: str
    provenance: str

    def resolve(self, file: str) -> Path | None:
        """The cited file inside the tree, or None (absent, or a path escaping the tree)."""
        try:
            path = (self.root / file).resolve()
            path.relative_to(self.root.resolve())
        except (ValueError, OSError):
            return None
        return path if path.is_file() else None

    def lines(self, file: str) -> list[str] | None:
        path = self.resolve(file)
        return _read_lines(str(path)) if path is not None else None


@lru_cache(maxsize=256)
def _read_lines(path: str) -> list[str]:
    return Path(path).read_text(encoding="utf-8", errors="replace").split("\n")


def open_tree(path: str | Path, library: str | None = None, licence: str | None = None) -> SourceTree:
    """A source tree with its commit: git HEAD if it is a git checkout, else the Debian source
    package's name and version (debian/changelog), else `sha256:` of its source files."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise BadInputError(f"--source {path} is not a folder", hint="pass the root of a library's source tree")
    commit, provenance, name = _git_commit(root), None, None
    if commit:
        provenance = f"git checkout {root.name} at {commit}"
    deb = _debian_source(root)
    if commit is None and deb is not None:
        name, version = deb
        commit = f"debian:{name}_{version}"
        provenance = f"Debian source package {name} {version} (apt-get source)"
    if commit is None:
        commit = "sha256:" + _tree_hash(root)
        provenance = f"local tree {root.name}"
    return SourceTree(root=root, library=library or name or root.name, commit=commit,
                      licence=licence or detect_licence(root), provenance=provenance)


def _git_commit(root: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0 or Path(top.stdout.strip()).resolve() != root:
        return None  # not a checkout, or a folder inside some other repository
    return out.stdout.strip()


def _debian_source(root: Path) -> tuple[str, str] | None:
    changelog = root / "debian" / "changelog"
    if not changelog.is_file():
        return None
    m = re.match(r"(\S+) \(([^)]+)\)", changelog.read_text(encoding="utf-8", errors="replace"))
    return (m.group(1), m.group(2)) if m else None


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for path in iter_source_files(root):
        h.update(str(path.relative_to(root)).encode() + b"\0" + file_sha256(path).encode() + b"\n")
    return h.hexdigest()[:40]


_LICENCES = (("Apache License", "Apache-2.0"), ("MIT License", "MIT"), ("Permission is hereby granted, free of charge",
             "MIT"), ("BSD 3-Clause", "BSD-3-Clause"), ("Redistribution and use in source and binary forms", "BSD"),
             ("GNU GENERAL PUBLIC LICENSE", "GPL"), ("University of Illinois/NCSA", "NCSA"))


def detect_licence(root: Path) -> str:
    """The tree's licence from LICENSE/COPYING/LICENSE.md/LICENSE.txt (SPDX id where recognised),
    else the `License:` of debian/copyright's first files stanza, else `unknown`."""
    for name in ("LICENSE", "LICENSE.md", "LICENSE.txt", "COPYING", "LICENSE.TXT"):
        path = root / name
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")[:4000]
            for needle, spdx in _LICENCES:
                if needle.lower() in text.lower():
                    return spdx
            return f"see {name}"
    copyright_file = root / "debian" / "copyright"
    if copyright_file.is_file():
        m = re.search(r"^License:\s*(\S+)", copyright_file.read_text(encoding="utf-8", errors="replace"), re.M)
        if m:
            return m.group(1)
    return "unknown"


# -------------------------------------------------------------------------------- the check
@dataclasses.dataclass(frozen=True)
class Grounding:
    """The check's outcome: `reason` (`ok` or why it was dropped), the identifiers named and
    those not found in the cited lines."""

    reason: str
    identifiers: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    file_sha256: str | None = None

    @property
    def grounded(self) -> bool:
        return self.reason == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {"grounded": self.grounded, "reason": self.reason, "identifiers": list(self.identifiers),
                "missing": list(self.missing), "file_sha256": self.file_sha256}


def identifiers_named(answer: str, listed: Iterable[str] = ()) -> list[str]:
    """Every code identifier the answer names (see the module docstring), in order, once each."""
    found: list[str] = []
    for item in listed:
        found += _IDENT_IN_CODE.findall(str(item))
    for span in _BACKTICK.findall(answer):
        found += _IDENT_IN_CODE.findall(span)
    found += _CODE_WORD.findall(_PATH.sub(" ", _BACKTICK.sub(" ", answer)))
    out, seen = [], set()
    for ident in found:
        if ident.lower() in _KEYWORDS or ident in seen or len(ident) < 2:
            continue
        seen.add(ident)
        out.append(ident)
    return out


def check_pair(tree: SourceTree, *, file: str, line_start: int, line_end: int, answer: str,
               identifiers: Iterable[str] = (), max_span: int = DEFAULT_MAX_SPAN) -> Grounding:
    """Check one pair against the tree (see the module docstring for the rules)."""
    lines = tree.lines(file)
    if lines is None:
        return Grounding("file_missing")
    sha = file_sha256(tree.resolve(file))
    if not (isinstance(line_start, int) and isinstance(line_end, int) and 1 <= line_start <= line_end <= len(lines)):
        return Grounding("lines_out_of_range", file_sha256=sha)
    if line_end - line_start + 1 > max_span:
        return Grounding("span_too_wide", file_sha256=sha)
    named = identifiers_named(answer, identifiers)
    if not named:
        return Grounding("no_identifiers", file_sha256=sha)
    cited = "\n".join(lines[line_start - 1:line_end])
    missing = [i for i in named if not re.search(rf"(?<![A-Za-z0-9_]){re.escape(i.split('::')[-1])}(?![A-Za-z0-9_])",
                                                 cited)]
    return Grounding("identifier_missing" if missing else "ok", tuple(named), tuple(missing), sha)
