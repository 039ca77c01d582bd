"""What a piece of Python source names, read from its AST (standard library only, no amdkv import).

Shared by the task adapters of external benchmarks (`amdkv.tasks.external`: which names a benchmark's
tests bind, which modules its kernel part imports, which interpreter limits it touches) and by the
verifier's static checks (`amdkv.verify.program`, `amdkv.verify.static_checks`). It lives below both
so that `amdkv.tasks` does not import `amdkv.verify` at module level (issue 20: the verifier reads
`amdkv.tasks.types`, so the other direction made a package cycle; docs/import_graph.md).
"""

from __future__ import annotations

import ast
import threading

# CPython 3.11 (3.11.7 here and on CI) keeps the AST constructor's recursion depth in state shared
# by every thread, so two threads in `ast.parse` at once can fail with "SystemError: AST constructor
# recursion depth mismatch" (python/cpython#106905). The verifier's parent parses candidates in
# several threads (static checks per submission): 2 of 6 runs of the 8-thread serve test got an
# infra_error from it. Every parse in amdkv goes through `parse`, one at a time per process.
_PARSE_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, serialised across this process's threads (see _PARSE_LOCK); SyntaxError as usual."""
    with _PARSE_LOCK:
        return ast.parse(source, filename=filename)


def module_bindings(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (definitions, imports, assignments)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name.split(".")[0]) for a in node.names)
        else:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    return names


def mentions(source: str, words: tuple[str, ...]) -> list[str]:
    """Which of `words` appear as identifiers/attributes in the code (not in comments/strings)."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in words:
            seen.add(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in words:
            seen.add(node.attr)
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in words:
            seen.add(node.name.split(".")[-1])
    return sorted(seen)


def imported_modules(source: str) -> list[str]:
    """Modules a kernel part imports (`import a.b` -> a.b; `from a.b import c` -> a.b)."""
    out: set[str] = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return sorted(out)
