"""What every external-benchmark loader shares: spec options, files, licences, provenance, and the
folder where generated task files live.

A suite spec is `PREFIX:PATH[?key=value&key=value]` (`tritonbench-g:/src/TritonBench`,
`rocmbench:/src/GEAK-eval?instructions=/data/rocm_instructions.json`). PATH is a local checkout the
user already has; nothing is downloaded. Standard library only (amdkv.tasks' import rule).
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Iterable

from amdkv.errors import BadInputError, TaskFormatError

# TritonBench-G and GEAK-eval put the kernel above a line of exactly this many '#' and the tests below.
SEPARATOR = "#" * 146


def parse_spec(rest: str, prefix: str, options: Iterable[str]) -> tuple[Path, dict[str, str]]:
    """(PATH, options) from the part of a suite spec after `PREFIX:`; unknown options are an error."""
    path_text, _, query = rest.partition("?")
    if not path_text:
        raise BadInputError(f"`{prefix}:` needs the path of a local checkout",
                            hint=f"e.g. {prefix}:/path/to/checkout (see docs/benchmarks.md)")
    opts = dict(urllib.parse.parse_qsl(query, keep_blank_values=True)) if query else {}
    unknown = sorted(set(opts) - set(options))
    if unknown:
        raise BadInputError(f"unknown option(s) {unknown} in suite spec {prefix}:{rest}",
                            hint=f"options of {prefix}: {sorted(options) or 'none'}")
    path = Path(path_text).expanduser()
    if not path.exists():
        raise BadInputError(f"{prefix}: {path} does not exist",
                            hint="pass the path of a local checkout of the benchmark's repository")
    return path, opts


def find_folder(root: Path, candidates: Iterable[str], what: str, prefix: str) -> Path:
    """The first of `candidates` (paths relative to a repository checkout) under `root`, else `root`
    itself when it holds the benchmark's `.py` files directly."""
    for rel in candidates:
        if (root / rel).is_dir():
            return root / rel
    if root.is_dir() and benchmark_files(root):
        return root
    raise BadInputError(f"{prefix}: no {what} under {root}",
                        hint=f"pass the repository checkout or the folder itself; looked for {list(candidates)}")


def select_files(rest: str, prefix: str, folders: Iterable[str], what: str,
                 options: Iterable[str]) -> tuple[Path, Path, list[Path], dict[str, str]]:
    """(checkout root, benchmark folder, the files selected by `?only=`, options) of a kernel-file
    benchmark's spec; no file selected is bad input."""
    root, opts = parse_spec(rest, prefix, ("only", *options))
    folder = find_folder(root, folders, what, prefix)
    files = benchmark_files(folder)
    if opts.get("only"):
        wanted = {n.strip() for n in opts["only"].split(",") if n.strip()}
        files = [f for f in files if f.name in wanted or f.stem in wanted]
    if not files:
        raise BadInputError(f"{prefix}: no {what} selected in {folder}", hint="check the path and ?only=")
    return root, folder, files, opts


def benchmark_files(folder: Path) -> list[Path]:
    """The benchmark's `*.py` files in a folder, sorted (package `__init__.py` and `_*` skipped)."""
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFormatError(f"cannot read benchmark file {path}: {exc}", hint="check the checkout") from exc


def split_at_separator(source: str, path: Path) -> tuple[str, str, int]:
    """(kernel part, test part, 1-based line of the separator) of a kernel-file benchmark's file."""
    lines = source.split("\n")
    seps = [i for i, line in enumerate(lines) if line.strip() == SEPARATOR]
    if not seps:
        raise TaskFormatError(f"{path} has no separator line of {len(SEPARATOR)} '#'",
                              hint="kernel-file benchmarks put the kernel above that line and the tests below")
    i = seps[0]
    return "\n".join(lines[:i]).rstrip() + "\n", "\n".join(lines[i + 1:]), i + 1


def detect_licence(folder: Path, root: Path) -> str | None:
    """SPDX id of the LICENSE file nearest above `folder`, inside the checkout `root` (MIT /
    Apache-2.0 / BSD-3-Clause); None when there is none or it is not one we recognise."""
    folder, root = folder.resolve(), root.resolve()
    chain = [folder, *folder.parents]
    chain = chain[:chain.index(root) + 1] if root in chain else [folder]
    for folder in chain:
        for name in ("LICENSE", "LICENSE.txt", "LICENSE.md", "COPYING"):
            f = folder / name
            if f.is_file():
                head = f.read_text(errors="replace")[:400]
                if "MIT License" in head or "Permission is hereby granted, free of charge" in head:
                    return "MIT"
                if "Apache License" in head:
                    return "Apache-2.0"
                if "BSD 3-Clause" in head or "Redistribution and use in source and binary forms" in head:
                    return "BSD-3-Clause"
                return None
    return None


def git_commit(root: Path) -> str | None:
    """The commit of the checkout containing `root` (read from .git, no git process), if any."""
    for folder in [root, *root.parents]:
        git = folder / ".git"
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            target = git.read_text().strip().removeprefix("gitdir:").strip()
            git = (folder / target).resolve()
        if not git.is_dir():
            continue
        head = (git / "HEAD").read_text().strip() if (git / "HEAD").is_file() else ""
        if not head.startswith("ref:"):
            return head or None
        ref = head.split(":", 1)[1].strip()
        for base in (git, Path(str(git).split("/worktrees/")[0])):
            if (base / ref).is_file():
                return (base / ref).read_text().strip()
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split()[0]
        return None
    return None


def provenance(benchmark: str, repo: str, root: Path, file: Path) -> dict[str, Any]:
    """Where a task came from: the repository, the file inside the checkout, its sha256 and commit."""
    try:
        rel = str(file.resolve().relative_to(root.resolve()))
    except ValueError:
        rel = file.name
    return {"benchmark": benchmark, "repository": repo, "file": rel, "commit": git_commit(root),
            "file_sha256": hashlib.sha256(file.read_bytes()).hexdigest()}


def provenance_text(p: dict[str, Any], *, with_commit: bool = True) -> str:
    commit = f"@{p['commit'][:12]}" if p.get("commit") and with_commit else ""
    return f"{p['benchmark']}: {p['repository']}{commit}:{p['file']} (sha256 {p['file_sha256'][:12]})"


def split_provenance(p: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(content-only provenance text for generated files, the Task's full provenance fields)."""
    return provenance_text(p, with_commit=False), {"provenance": provenance_text(p), "provenance_detail": p}


def generated_dir(benchmark: str, key: str) -> Path:
    """Where generated task files of one benchmark file live: content-addressed under the verifier's
    cache dir (`AMDKV_CACHE_DIR`), so the same benchmark file always maps to the same task file and
    its cached references."""
    from amdkv.config import VerifierConfig

    folder = VerifierConfig.from_env().cache_path / "external" / benchmark / key
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_atomic(path: Path, text: str) -> None:
    """Write `text` unless the file already holds it (several processes may load one suite at once)."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def content_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", errors="surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()[:16]


_SAFE = re.compile(r"[^A-Za-z0-9_]")


def module_safe(name: str) -> str:
    """A file stem usable as a Python module name part."""
    return _SAFE.sub("_", name)
