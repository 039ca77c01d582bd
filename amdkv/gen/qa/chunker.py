"""Split C++/HIP source trees into chunks by function and class, with file, line range and commit.

A light parser, not a compiler front end (no preprocessing, no templates resolved). It masks
comments, string and character literals and preprocessor lines (keeping every newline, so line
numbers stay exact), then follows braces: at namespace, `extern "C"` and class scope a `{` opens
a definition when the text before it looks like one:

- `class|struct|union Name ... {` -> a class chunk (templates, base lists, attributes allowed);
- `... name(params) qualifiers {` -> a function chunk; the name is the identifier before the last
  top-level parenthesised group once a constructor's initialiser list (`) : a(x), b{y}`), a
  trailing return type (`-> T`), `noexcept(...)`, `requires ...` and `__attribute__((...))` are
  cut off, so `ROCBLAS_KERNEL(NB) axpy_kernel(...)` is named `axpy_kernel`;
- `namespace N {` and `extern "C" {` are entered without a chunk of their own;
- anything else (`= {` initialisers, enums, lambdas, control flow inside bodies) is skipped.

A class longer than `max_lines` is not one chunk: its member definitions are. A function longer
than `max_lines` is shown up to `max_lines` lines (`truncated`). A contiguous comment block right
above a definition belongs to it (documentation is what questions are often about).

Known limits: definitions produced by macros (`#define DEFINE_KERNEL(T) ...`) are invisible
(preprocessor lines are masked), and so are namespaces opened by a macro (rocPRIM's
`BEGIN_ROCPRIM_NAMESPACE`: names then lack that qualifier); a function-like macro call at namespace scope followed by a
brace block is taken for a function; unbalanced braces inside `#if` branches (a signature
written twice under `#if/#else` with one body) shift the nesting of what follows in that file;
K&R-style C definitions are not recognised. Measured counts on real trees are in docs/gen.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path
from typing import Iterator

SOURCE_SUFFIXES = (".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp", ".c", ".cc", ".cpp", ".cxx", ".hip", ".cu", ".cuh")
SKIP_DIRS = {".git", ".pc", ".svn", "__pycache__", "node_modules", "build", ".github"}
DEFAULT_MAX_LINES = 120
MIN_LINES = 3               # one-line accessors tell nothing worth a question

_IDENT = r"[A-Za-z_~][A-Za-z_0-9]*"
_CLASS = re.compile(r"\b(class|struct|union)\s+(?:(?:alignas\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)|\[\[.*?\]\])\s*)*"
                    rf"({_IDENT}(?:\s*::\s*{_IDENT})*)")
_NAMESPACE = re.compile(rf"\bnamespace\b(?:\s+({_IDENT}(?:\s*::\s*{_IDENT})*))?\s*$")
_EXTERN = re.compile(r"\bextern\s*$")
_INIT_BRACE = re.compile(r"\)\s*(?:const|volatile|noexcept|\s)*:(?!:).*[\w>]\s*$")
_CONTROL = {"if", "for", "while", "switch", "catch", "do", "else", "try", "return", "sizeof", "decltype",
            "alignof", "static_assert", "defined"}


@dataclasses.dataclass(frozen=True)
class Chunk:
    """One definition: `file` relative to the tree root, 1-based inclusive `line_start`..`line_end`
    (the lines shown: the whole definition unless `truncated`), `name` qualified by its
    namespaces and classes, `kind` `function` or `class`."""

    library: str
    file: str
    line_start: int
    line_end: int
    name: str
    kind: str
    text: str
    commit: str
    truncated: bool = False

    @property
    def chunk_id(self) -> str:
        return f"{self.library}:{self.file}:{self.line_start}-{self.line_end}"

    def numbered(self) -> str:
        """The chunk's lines with their line numbers, as the model is shown them."""
        width = len(str(self.line_end))
        return "\n".join(f"{n:>{width}}| {line}" for n, line in
                         zip(range(self.line_start, self.line_end + 1), self.text.split("\n")))


_MASK_START = re.compile(r'//|/\*|"|\'|^[ \t]*#', re.M)
_NOT_NEWLINE = re.compile(r"[^\n]")
_RAW_OPEN = re.compile(r'"([^()\\ ]{0,16})\(')


def mask_source(text: str) -> str:
    """`text` with comments, string/char literals (raw strings too) and preprocessor lines (with
    their backslash continuations) replaced by spaces, newlines kept, so braces and names in them
    do not count. Jumps from one such start to the next with a regex (large trees: ~MB/s)."""
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        m = _MASK_START.search(text, i)
        if m is None:
            out.append(text[i:])
            return "".join(out)
        start, tok = m.start(), m.group(0)
        if tok.lstrip(" \t") == "#":
            j = start
            while True:  # to the end of the line, following backslash continuations
                j = text.find("\n", j)
                if j < 0 or text[j - 1] != "\\":
                    break
                j += 1
            end = n if j < 0 else j
        elif tok == "//":
            j = text.find("\n", start)
            end = n if j < 0 else j
        elif tok == "/*":
            j = text.find("*/", start + 2)
            end = n if j < 0 else j + 2
        elif tok == '"' and start > 0 and text[start - 1] == "R" and (start < 2 or not (text[start - 2].isalnum()
                                                                                        or text[start - 2] == "_")):
            raw = _RAW_OPEN.match(text, start)
            close = text.find(f"){raw.group(1)}\"", raw.end()) if raw else -1
            end = n if raw and close < 0 else (close + len(raw.group(1)) + 2 if raw else _literal_end(text, start))
        elif tok == "'" and 0 < start < n - 1 and text[start - 1].isalnum() and text[start + 1].isalnum():
            out.append(text[i:start + 1])  # a digit separator: 1'000'000
            i = start + 1
            continue
        else:
            end = _literal_end(text, start)
        out.append(text[i:start])
        out.append(_NOT_NEWLINE.sub(" ", text[start:end]))
        i = end


def _literal_end(text: str, start: int) -> int:
    """End of the string or character literal opening at `start` (its line's end if unclosed)."""
    quote, j, n = text[start], start + 1, len(text)
    while j < n and text[j] != quote and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n)


@dataclasses.dataclass
class _Scope:
    kind: str            # namespace | class | function | init (a brace initialiser) | other
    name: str
    open_pos: int
    header_pos: int      # where the definition's text starts
    children: list["_Found"] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class _Found:
    kind: str
    name: str
    start: int           # char offsets in the file
    end: int
    children: list["_Found"]


def find_definitions(text: str) -> list[_Found]:
    """Top-level definitions (functions, classes with their members) of one file."""
    masked = mask_source(text)
    root = _Scope("namespace", "", -1, 0)
    stack = [root]
    boundary = 0  # where the current header starts (after the last ; { } at this level)
    for hit in re.finditer(r"[{};]", masked):
        pos, ch = hit.start(), hit.group(0)
        top = stack[-1]
        opaque = top.kind in ("function", "other", "init")
        if ch == ";":
            if not opaque:
                boundary = pos + 1
            continue
        if ch == "{":
            if opaque:
                stack.append(_Scope("other", "", pos, pos))
                continue
            header = masked[boundary:pos]
            kind, name = classify_header(header)
            start = boundary + (len(header) - len(header.lstrip()))
            stack.append(_Scope(kind, name, pos, start))
            if kind != "init":
                boundary = pos + 1
            continue
        # "}"
        if len(stack) == 1:
            boundary = pos + 1  # unbalanced: ignore
            continue
        scope = stack.pop()
        parent = stack[-1]
        if scope.kind in ("function", "class"):
            end = pos + 1
            if scope.kind == "class":
                m = re.match(r"[^;{}]*;", masked[end:])  # `} name;` / `};`
                if m and "(" not in m.group(0):
                    end += m.end()
            parent.children.append(_Found(scope.kind, scope.name, scope.header_pos, end, scope.children))
        elif scope.kind == "namespace":
            parent.children.extend(_qualify(scope.name, scope.children))
        if parent.kind not in ("function", "other", "init") and scope.kind != "init":
            boundary = pos + 1  # (after an init brace the constructor's header goes on)
    return root.children


def _qualify(prefix: str, found: list[_Found]) -> list[_Found]:
    if not prefix:
        return found
    return [dataclasses.replace(f, name=f"{prefix}::{f.name}") for f in found]


def classify_header(header: str) -> tuple[str, str]:
    """(kind, name) of the text before a `{` at namespace or class scope."""
    h = " ".join(header.split())
    if not h:
        return "other", ""
    m = _NAMESPACE.search(h)
    if m:
        return "namespace", (m.group(1) or "").replace(" ", "")
    if _EXTERN.search(h):
        return "namespace", ""
    if h.endswith("=") or re.search(r"\benum\b", h):
        return "other", ""
    h = _strip_template_heads(h)
    m = _CLASS.search(h)
    if m and "(" not in h[: m.start()] and not re.search(r"\)\s*$", h):
        return "class", m.group(2).replace(" ", "")
    if _INIT_BRACE.search(h):
        return "init", ""  # `Ctor(int n) : a(n), b{` : a member's brace initialiser, not the body
    name = function_name(h)
    return ("function", name) if name else ("other", "")


def _strip_template_heads(h: str) -> str:
    """`template <class T, int N> struct X` -> `struct X` (the parameters' `class T` is not a class)."""
    while True:
        m = re.search(r"\btemplate\s*<", h)
        if not m:
            return h
        depth, i = 1, m.end()
        while i < len(h) and depth:
            depth += (h[i] == "<") - (h[i] == ">")
            i += 1
        h = h[: m.start()] + " " + h[i:]


def function_name(header: str) -> str | None:
    """The function name of a definition header, or None when it is not one (see the module docstring)."""
    h = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", header)
    h = re.sub(r"\[\[.*?\]\]", " ", h)
    h = _cut_at_depth0(h, ("->",))                    # trailing return type
    h = re.sub(r"\b(noexcept|requires|throw)\b\s*(\(.*\))?\s*$", "", h.strip())
    groups = _paren_groups(h)
    if not groups:
        return None
    # a constructor's initialiser list: `) : member(x), other{y}`: cut at the first `:` after a
    # top-level `)` that is not part of `::`
    for (_, close) in groups:
        rest = h[close + 1:]
        m = re.match(r"\s*(?:const|volatile|override|final|\s)*:(?!:)", rest)
        if m:
            h = h[: close + 1]
            groups = _paren_groups(h)
            break
    open_, close = groups[-1]
    tail = h[close + 1:].strip()
    if tail and not re.fullmatch(r"(?:const|volatile|override|final|mutable|&|&&|\s)*", tail):
        return None
    m = re.search(rf"((?:{_IDENT}\s*::\s*)*(?:operator\s*\(\s*\)|operator\s*[^\s(]+|{_IDENT}))\s*(?:<[^()]*>)?\s*$", h[:open_])
    if not m:
        return None
    name = re.sub(r"\s*::\s*", "::", re.sub(r"\s+", " ", m.group(1)))  # `operator T*` keeps its space
    if name.split("::")[-1] in _CONTROL:
        return None
    return name


def _paren_groups(text: str) -> list[tuple[int, int]]:
    groups, depth, start = [], 0, -1
    for i, c in enumerate(text):
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0:
                groups.append((start, i))
    return groups


def _cut_at_depth0(text: str, tokens: tuple[str, ...]) -> str:
    depth = 0
    for i, c in enumerate(text):
        depth += (c in "(<[") - (c in ")>]") if c != "-" else 0
        if depth == 0 and any(text.startswith(t, i) for t in tokens):
            return text[:i]
    return text


# ------------------------------------------------------------------------------------ chunks
def chunk_file(text: str, *, library: str, file: str, commit: str, max_lines: int = DEFAULT_MAX_LINES) -> list[Chunk]:
    """The chunks of one file (see the module docstring), in file order."""
    lines = text.split("\n")
    offsets = _line_offsets(text)
    masked_lines = mask_source(text).split("\n")
    chunks: list[Chunk] = []

    def emit(found: _Found, outer: str) -> None:
        name = f"{outer}::{found.name}" if outer else found.name
        first = _line_of(offsets, found.start)
        last = _line_of(offsets, max(found.end - 1, found.start))
        if found.kind == "class" and last - first + 1 > max_lines and found.children:
            for child in found.children:
                emit(child, name)
            return
        first = _with_comment_above(lines, masked_lines, first)
        if last - first + 1 < MIN_LINES:
            return
        truncated = last - first + 1 > max_lines
        if truncated:
            last = first + max_lines - 1
        chunks.append(Chunk(library=library, file=file, line_start=first, line_end=last, name=name,
                            kind=found.kind, text="\n".join(lines[first - 1:last]), commit=commit,
                            truncated=truncated))

    for found in find_definitions(text):
        emit(found, "")
    return sorted(chunks, key=lambda c: c.line_start)


def _line_offsets(text: str) -> list[int]:
    offs, pos = [0], 0
    for line in text.split("\n")[:-1]:
        pos += len(line) + 1
        offs.append(pos)
    return offs


def _line_of(offsets: list[int], pos: int) -> int:
    import bisect

    return bisect.bisect_right(offsets, pos)


def _with_comment_above(lines: list[str], masked: list[str], first: int) -> int:
    """Extend a definition upwards over a contiguous comment block (lines that are blank once
    masked but not blank in the source, and are not preprocessor lines)."""
    k = first - 1
    while k >= 1 and lines[k - 1].strip() and not masked[k - 1].strip() and not lines[k - 1].lstrip().startswith("#"):
        k -= 1
    return k + 1


def iter_source_files(root: Path) -> Iterator[Path]:
    """C/C++/HIP sources under `root`, in a stable order, skipping VCS, build and patch folders."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            if name.endswith(SOURCE_SUFFIXES):
                yield Path(dirpath) / name


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
