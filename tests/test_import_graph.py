"""No import cycle among amdkv's modules comes back (benchmarks/import_graph.py, stdlib `ast` only).

Module-level imports must form no cycle: a cycle makes import order matter (a name read from a
half-initialised module). Imports inside functions are allowed: they are the lazy-loading pattern
the project uses for heavy dependencies (torch, triton, datasets, TRL) and for stages that load on
use, and they run only after every module involved has finished importing. The lazy graph is
checked too, because the cycles removed in issue 20 (tasks.loader <-> tasks.suites,
verify.fork_server <-> verify.sandbox) ran through lazy imports; a new lazy cycle fails here with
its edges listed, and can be allowed deliberately by adding it to LAZY_CYCLES_ALLOWED with a reason.

Package level (subpackages and top-level modules as nodes): no cycle among module-level imports
(issue 20 removed tasks <-> verify and toolchain <-> verify by moving `amdkv/source_ast.py`,
`amdkv/process.py` and `amdkv/archs.py` below them); cycles through lazy imports are reported as
warnings and fail unless listed in LAZY_PACKAGE_CYCLES_ALLOWED (docs/import_graph.md).
"""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

from bench_scripts import load_benchmark_script

ROOT = Path(__file__).resolve().parent.parent

# Lazy (in-function) cycles accepted on purpose: {frozenset(modules): why}. Empty today.
LAZY_CYCLES_ALLOWED: dict[frozenset[str], str] = {}

# Package cycles through lazy imports accepted on purpose: {frozenset(packages): why}.
LAZY_PACKAGE_CYCLES_ALLOWED: dict[frozenset[str], str] = {
    frozenset({"amdkv.tasks", "amdkv.verify"}):
        "the task checkers inside amdkv.tasks (`checks`, `procedural.checks`, `ingest`, `isolated`) run "
        "tasks through the verifier's reference job, runtime guards and sandbox, inside the functions "
        "that check or load; the verifier reads `tasks.types` at module level. Moving the checkers above "
        "both would change the public paths `amdkv.tasks.procedural.checks`, `amdkv.tasks.ingest` and "
        "`amdkv.tasks.isolated` (docs/import_graph.md)",
}


def _tool():
    return load_benchmark_script("import_graph", module_name="amdkv_import_graph", register=True)


def _describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    lines = []
    for component in found:
        members = set(component)
        lines += [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "\n".join(lines)


def test_no_cycle_among_module_level_imports():
    tool = _tool()
    graph = tool.build_graph(ROOT)
    assert len(graph) > 100, "the tool found too few amdkv modules: is ROOT right?"
    found = tool.cycles(graph)
    assert found == [], "module-level import cycle(s):\n" + _describe(graph, found)


def test_no_new_cycle_through_lazy_imports():
    tool = _tool()
    graph = tool.build_graph(ROOT, lazy=True)
    found = [c for c in tool.cycles(graph) if frozenset(c) not in LAZY_CYCLES_ALLOWED]
    assert found == [], "import cycle(s) through lazy imports:\n" + _describe(graph, found)


@functools.lru_cache(maxsize=None)
def _package_report() -> dict:
    return _tool().package_report(ROOT)


def _describe_packages(report: dict, found: list[list[str]], lazy: bool) -> str:
    lines = []
    for component in found:
        for a in component:
            for b in component:
                edge = report["edges"].get(f"{a} -> {b}")
                if edge and (lazy or edge["kind"] == "module"):
                    lines.append(f"{a} -> {b} [{edge['kind']}]: " + "; ".join(edge["via"]))
    return "\n".join(lines)


def test_no_package_cycle_among_module_level_imports():
    """Between subpackages (and top-level modules), module-level imports form no cycle either: a stage
    imports the stages below it, never one above (issue 20 removed tasks <-> verify)."""
    report = _package_report()
    assert {"amdkv.tasks", "amdkv.verify", "amdkv.toolchain"} <= set(report["packages"])
    assert report["cycles"] == [], ("package cycle(s) among module-level imports:\n"
                                    + _describe_packages(report, report["cycles"], lazy=False))


def test_package_cycles_through_lazy_imports_are_the_known_ones():
    """Package cycles that need a lazy (in-function) import are reported (a warning in pytest's
    summary, with the module edges behind them) and fail only when not in LAZY_PACKAGE_CYCLES_ALLOWED:
    so `amdkv.toolchain` cannot drift back into a cycle with the verifier, nor a new stage join one."""
    report = _package_report()
    for component in report["lazy_cycles"]:
        warnings.warn("package cycle through lazy imports: " + ", ".join(component) + "\n"
                      + _describe_packages(report, [component], lazy=True))
    found = [c for c in report["lazy_cycles"] if frozenset(c) not in LAZY_PACKAGE_CYCLES_ALLOWED]
    assert found == [], ("package cycle(s) through lazy imports:\n"
                         + _describe_packages(report, found, lazy=True))


def test_the_tool_finds_a_planted_cycle(tmp_path):
    """The check can fail: a two-module package with a module-level cycle is reported, and the same
    cycle through an import inside a function counts only in the lazy graph."""
    tool = _tool()
    pkg = tmp_path / "amdkv"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from amdkv import b\n")
    (pkg / "b.py").write_text("import sys\nif sys:\n    from amdkv.a import x\n")
    assert tool.cycles(tool.build_graph(tmp_path)) == [["amdkv.a", "amdkv.b"]]
    (pkg / "b.py").write_text("def f():\n    from amdkv.a import x\n")
    assert tool.cycles(tool.build_graph(tmp_path)) == []
    assert tool.cycles(tool.build_graph(tmp_path, lazy=True)) == [["amdkv.a", "amdkv.b"]]


def test_the_tool_finds_a_planted_package_cycle(tmp_path):
    """Package level: a module of `amdkv.a` importing one of `amdkv.b` at module level and a module
    of `amdkv.b` importing one of `amdkv.a` inside a function is a package cycle only when lazy imports
    count; both edges at module level make it a module-level package cycle (with no module cycle)."""
    tool = _tool()
    pkg = tmp_path / "amdkv"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from amdkv.b import y\n")
    (pkg / "a" / "z.py").write_text("")
    (pkg / "b" / "y.py").write_text("def f():\n    from amdkv.a import z\n")
    report = tool.package_report(tmp_path)
    assert report["cycles"] == []
    assert report["lazy_cycles"] == [["amdkv.a", "amdkv.b"]]
    assert report["edges"]["amdkv.a -> amdkv.b"] == {"kind": "module", "via": ["amdkv.a.x -> amdkv.b.y"]}
    assert report["edges"]["amdkv.b -> amdkv.a"] == {"kind": "lazy", "via": ["amdkv.b.y -> amdkv.a.z"]}
    (pkg / "b" / "y.py").write_text("from amdkv.a import z\n")
    assert tool.cycles(tool.build_graph(tmp_path)) == []
    assert tool.package_report(tmp_path)["cycles"] == [["amdkv.a", "amdkv.b"]]
