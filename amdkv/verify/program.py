"""Candidate programs: a candidate's text followed by trusted code its task supplies.

Most tasks take a candidate file that defines `ModelNew` on its own. Tasks loaded from kernel-file
benchmarks (TritonBench-G, ROCmBench: docs/benchmarks.md) take the *kernel code* a model wrote, and
the benchmark's own tests produce the outputs. Such a task names, in `metadata["candidate_program"]`,
the trusted text that follows the candidate in the file the worker imports (the benchmark's tests and
an adapter that defines `ModelNew`), the names of that text the candidate must not call into, and the
API names the tests call in the candidate's code. This module:

- builds the program text (`program_text`): the candidate first, so its line numbers are its own;
- says from which line on the code is the task's (`trusted_first_line`): the worker's op recorder does
  not count PyTorch compute run by those lines (the tests build inputs and compute their own
  references), and does count it for the candidate's lines;
- adds the static findings that only make sense for such programs (`program_findings`): the candidate
  calling the tests' own helpers, or binding an API name the tests call to a library function
  (`add = torch.add` would run PyTorch from the tests' lines, where no recorder looks).

Standard library only (light import).
"""

from __future__ import annotations

import ast
from typing import Any, Iterator, Mapping

from amdkv.source_ast import module_bindings, parse as parse_source
from amdkv.verify.static_checks import Finding, _bound_names, _dotted, candidate_may_import, torch_compute_name

PROGRAM_KEY = "candidate_program"
# Never allowed to a candidate, whatever the benchmark's own kernel files import: they reach
# processes, files, the network or the interpreter's internals (static_checks' reasons).
NEVER_ALLOWED_IMPORTS = frozenset({"subprocess", "socket", "ctypes", "importlib", "pickle", "marshal",
                                   "multiprocessing", "shutil", "pathlib", "io", "builtins", "inspect",
                                   "gc", "threading", "signal", "urllib", "http", "requests", "tempfile",
                                   "torch.utils.cpp_extension", "torch._C", "torch.utils._python_dispatch",
                                   "torch.overrides", "torch.serialization", "torch.hub", "torch._dynamo",
                                   "triton._C", "triton.runtime.interpreter"})


def program_spec(task: Any) -> Mapping[str, Any] | None:
    """The task's candidate-program spec, or None for ordinary (ModelNew) tasks."""
    spec = (getattr(task, "metadata", None) or {}).get(PROGRAM_KEY)
    return spec or None


SEPARATOR = "#" * 146


def candidate_part(spec: Mapping[str, Any], source: str) -> str:
    """The candidate's text as its program uses it. Models often answer with the benchmark's tests
    too, so, as GEAK-eval and TritonBench strip them from a model's output: everything from the
    benchmark's separator line on is dropped, and top-level `test_*` functions, top-level calls of
    them (`result_gold = test_x()`) and `if __name__ == "__main__":` blocks are blanked. Blanked, not
    removed: every other line keeps its text and its number. Unparsable text is returned as it is
    (the syntax error is reported as usual)."""
    lines = source.split("\n")
    cut = next((i for i, line in enumerate(lines) if line.strip() == SEPARATOR), None)
    if cut is not None:
        lines = lines[:cut]
    try:
        tree = parse_source("\n".join(lines))
    except SyntaxError:
        return source
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
        test_def = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
        test_call = isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.startswith("test_")
        main_guard = isinstance(node, ast.If) and "__name__" in ast.unparse(node.test)
        if test_def or test_call or main_guard:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            for i in range(first - 1, node.end_lineno):
                lines[i] = ""
    return "\n".join(lines)


def program_text(spec: Mapping[str, Any], candidate_source: str) -> str:
    """The file the worker imports: the candidate's text, then the task's trusted suffix."""
    return candidate_source.rstrip("\n") + "\n\n" + spec["suffix"]


def trusted_first_line(spec: Mapping[str, Any], candidate_source: str) -> int:
    """First line (1-based) of the task's trusted suffix in `program_text`."""
    return len(candidate_source.rstrip("\n").split("\n")) + 2


def _aliases(tree: ast.Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def global_loads(tree: ast.Module) -> Iterator[ast.Name]:
    """The loads of names that resolve to module globals: not those a function, lambda or
    comprehension around them binds itself (a kernel parameter `N_CTX` is not the tests' module-level
    `N_CTX`; ROCmBench's flash-attention reference was `uses_benchmark_test` for that). Decorators and
    default values are read in the enclosing scope; a class body's names are not seen by its methods."""
    def visit(node: ast.AST, local: frozenset[str]) -> Iterator[ast.Name]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]
            outer = [*getattr(node, "decorator_list", []), *args.defaults, *(d for d in args.kw_defaults if d),
                     *(a.annotation for a in params if a.annotation), *filter(None, [getattr(node, "returns", None)])]
            for expr in outer:
                yield from visit(expr, local)
            body = node.body if isinstance(node.body, list) else [node.body]
            inner = local | _bound_names(body, node.args)
            for stmt in body:
                yield from visit(stmt, inner)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            local = local | targets
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            yield node
        for child in ast.iter_child_nodes(node):
            yield from visit(child, local)

    yield from visit(tree, frozenset())


def program_findings(spec: Mapping[str, Any], candidate_source: str) -> list[Finding]:
    """Findings specific to programs (the candidate's source must parse; callers check that first)."""
    tree = parse_source(candidate_source)
    own = module_bindings(tree)
    # A module the tests import under its own name (`import torch`) is not test code: a candidate may use
    # it as GEAK-eval's harness lets it (TritonBench-G's block_sparse_attn never imports torch above the
    # separator) when it could have imported that module itself; the static checks resolve the name as
    # that module either way.
    usable = {m for m in spec.get("test_module_imports", ()) if candidate_may_import(m)}
    test_only = set(spec.get("test_names", ())) - own - usable
    findings: list[Finding] = []
    for node in global_loads(tree):
        if node.id in test_only:
            findings.append(Finding("uses_benchmark_test", node.lineno,
                                    f"uses `{node.id}`, which the benchmark's test code defines: the candidate "
                                    "must not call into the tests (they compute the references)"))
    aliases = _aliases(tree)
    scopes = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in scopes:
        for node in body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            value = node.value
            if isinstance(value, ast.Call) and _dotted(value.func) in ("functools.partial", "partial") \
                    and value.args:
                value = value.args[0]
            name = _dotted(value)
            full = torch_compute_name(name, aliases) if name else None
            if full:
                findings.append(Finding("torch_fallback", node.lineno,
                                        f"binds a name to `{full}`: the benchmark's tests would call PyTorch's "
                                        "op instead of the candidate's kernel"))
    return findings


def allowed_imports(spec: Mapping[str, Any] | None) -> frozenset[str]:
    """Modules the task's candidates may import beyond the usual list: those the benchmark's own
    kernel part imports (GEAK-eval's ROCm kernels open with `import pytest`, `numpy` and
    `torch.testing`), minus NEVER_ALLOWED_IMPORTS."""
    if not spec:
        return frozenset()
    return frozenset(m for m in spec.get("allowed_imports", ())
                     if not any(m == n or m.startswith(n + ".") for n in NEVER_ALLOWED_IMPORTS))
