"""List amdkv's module-level import edges and the cycles among them (stdlib ``ast`` only).

Why module level only: amdkv loads heavy or optional dependencies (torch, triton, datasets, TRL,
and sometimes a sibling stage) *inside the function that needs them*. Such a lazy import runs when
the function is called, after every module involved has finished importing, so it cannot form an
import-time cycle and is the project's sanctioned pattern. An import at module level (including
inside ``if``/``try`` blocks at module level, but not inside ``def``/``class`` bodies or under
``if TYPE_CHECKING:``) runs when the module is imported; a cycle among those makes import order
matter and is what this tool reports.

Usage::

    python benchmarks/import_graph.py            # edges count, cycles (strongly connected components)
    python benchmarks/import_graph.py --edges    # also every edge, one per line
    python benchmarks/import_graph.py --json     # machine-readable
    python benchmarks/import_graph.py --lazy     # informational: imports inside functions too
    python benchmarks/import_graph.py --packages # between amdkv's subpackages (see below)

Package level (``--packages``): each subpackage (``amdkv.verify``, ``amdkv.tasks``...) and each
top-level module (``amdkv.errors``, ``amdkv.config``...) is one node; A -> B when any module of A
imports any module of B. Two graphs are reported side by side: the edges made by module-level
imports, and those made only by lazy imports (inside functions). A module-level package cycle makes
the exit status 1; a cycle that needs a lazy edge is listed (and counts for the exit status only
with ``--lazy``). ``--edges`` lists every package edge with the module edges behind it.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

PACKAGE = "amdkv"
ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path, root: Path) -> str:
    """Dotted module name of a file under ``root`` (``amdkv/verify/__init__.py`` -> ``amdkv.verify``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(tree: ast.Module):
    """Yield Import/ImportFrom nodes executed at import time (not in functions, classes, TYPE_CHECKING)."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                stack.extend(node.body)
            stack.extend(node.orelse)
        elif isinstance(node, ast.Try):
            stack.extend(node.body)
            stack.extend(node.orelse)
            stack.extend(node.finalbody)
            for handler in node.handlers:
                stack.extend(handler.body)
        elif isinstance(node, (ast.With,)):
            stack.extend(node.body)


def _resolve(current: str, is_package: bool, node: ast.ImportFrom) -> str:
    """Absolute module named by a (possibly relative) ``from X import`` statement."""
    if not node.level:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _all_imports(tree: ast.Module):
    """Yield every Import/ImportFrom node, lazy (inside functions) ones included."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def build_graph(root: Path = ROOT, package: str = PACKAGE, lazy: bool = False) -> dict[str, set[str]]:
    """Map each amdkv module to the amdkv modules it imports at module level (``lazy``: also the
    imports inside functions, which cannot deadlock an import but still tie two modules together).

    ``from pkg import name`` counts as an edge to ``pkg.name`` when that is a module, else to
    ``pkg``. Importing ``a.b.c`` also runs ``a`` and ``a.b`` (their ``__init__``); those implicit
    parent edges are left out because every module has them and they only form a cycle when a
    package ``__init__`` imports its own children, which the listing then shows explicitly.
    """
    files = sorted((root / package).rglob("*.py"))
    modules = {module_name(f, root): f for f in files}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in (_all_imports(tree) if lazy else _module_level_imports(tree)):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve(mod, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != mod and target.split(".")[0] == package:
                    graph[mod].add(target)
    return graph


def package_of(mod: str) -> str:
    """The node a module belongs to in the package graph: its top-level subpackage
    (``amdkv.verify.amd.archs`` -> ``amdkv.verify``), or itself for a top-level module (``amdkv.errors``)."""
    return ".".join(mod.split(".")[:2])


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Each edge between two packages with the module edges behind it: {(A, B): [(a, b), ...]}, sorted."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for mod in sorted(graph):
        for target in sorted(graph[mod]):
            pair = (package_of(mod), package_of(target))
            if pair[0] != pair[1]:
                out.setdefault(pair, []).append((mod, target))
    return out


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same edges between amdkv's top-level subpackages (``amdkv.verify``, ``amdkv.toolchain``...)."""
    out: dict[str, set[str]] = {package_of(mod): set() for mod in graph}
    for a, b in package_edges(graph):
        out[a].add(b)
    return out


def package_report(root: Path = ROOT, package: str = PACKAGE) -> dict:
    """Both package graphs: ``edges`` maps "A -> B" to its kind (``module`` when a module-level import
    makes it, else ``lazy``) and the module edges behind it (module-level ones only, for a ``module``
    edge); ``cycles`` are the package cycles among module-level imports, ``lazy_cycles`` those when
    lazy imports count too."""
    eager_graph, full_graph = build_graph(root, package), build_graph(root, package, lazy=True)
    eager, full = package_edges(eager_graph), package_edges(full_graph)
    edges = {f"{a} -> {b}": {"kind": "module" if (a, b) in eager else "lazy",
                             "via": [f"{m} -> {t}" for m, t in eager.get((a, b), via)]}
             for (a, b), via in sorted(full.items())}
    return {"packages": sorted(package_graph(full_graph)), "edges": edges,
            "cycles": cycles(package_graph(eager_graph)),
            "lazy_cycles": cycles(package_graph(full_graph))}


def _print_packages(report: dict, show_edges: bool) -> None:
    edges = report["edges"]
    n_module = sum(e["kind"] == "module" for e in edges.values())

    def line(name: str) -> str:
        e = edges[name]
        more = f" (+{len(e['via']) - 1} more)" if len(e["via"]) > 1 else ""
        label = "module level" if e["kind"] == "module" else "lazy only"
        return f"    {name}  [{label}: {e['via'][0]}{more}]"

    if show_edges:
        for name, e in edges.items():
            print(f"{name}  [{'module level' if e['kind'] == 'module' else 'lazy only'}]")
            for via in e["via"]:
                print(f"    {via}")
    print(f"{len(report['packages'])} subpackages and top-level modules of {PACKAGE}/: {n_module} package "
          f"edges through module-level imports, {len(edges) - n_module} more through lazy imports only")
    for key, kind in (("cycles", "module-level imports"),
                      ("lazy_cycles", "module-level and lazy (in-function) imports")):
        print(f"{len(report[key])} package cycle(s) among {kind}")
        for component in report[key]:
            print("  cycle: " + ", ".join(component))
            for a in component:
                for b in component:
                    name = f"{a} -> {b}"
                    if name in edges and (key == "lazy_cycles" or edges[name]["kind"] == "module"):
                        print(line(name))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="print every module-level edge")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--lazy", action="store_true",
                        help="also count imports inside functions (informational: these are allowed)")
    parser.add_argument("--packages", action="store_true",
                        help="edges between top-level subpackages instead of modules; with --lazy, a "
                             "package cycle through lazy imports also makes the exit status 1")
    args = parser.parse_args(argv)
    if args.packages:
        report = package_report()
        found = report["cycles"] + (report["lazy_cycles"] if args.lazy else [])
        if args.json:
            print(json.dumps(report, indent=1))
        else:
            _print_packages(report, args.edges)
        return 1 if found else 0
    graph = build_graph(lazy=args.lazy)
    found = cycles(graph)
    n_edges = sum(len(t) for t in graph.values())
    if args.json:
        print(json.dumps({"modules": len(graph), "edges": n_edges, "cycles": found,
                          "graph": {k: sorted(v) for k, v in sorted(graph.items())}}, indent=1))
        return 1 if found else 0
    if args.edges:
        for mod in sorted(graph):
            for target in sorted(graph[mod]):
                print(f"{mod} -> {target}")
    kind = "module-level and lazy (in-function)" if args.lazy else "module-level"
    print(f"{len(graph)} modules, {n_edges} {kind} import edges inside {PACKAGE}/")
    print(f"{len(found)} cycle(s) among {kind} imports")
    for component in found:
        members = set(component)
        print("  cycle: " + ", ".join(component))
        for mod in component:
            for target in sorted(graph[mod] & members):
                print(f"    {mod} -> {target}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
