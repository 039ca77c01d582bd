"""Reading and adapting a kernel-file benchmark's test code (the part below the separator).

The tests are trusted benchmark code, but written for one GPU and for the benchmark's own runner, so
before they run inside amdkv's verifier they are rewritten on the AST (never with regexes):

- device strings: the constants `'cuda'` / `'cuda:0'` become `_amdkv_device` (the device being
  verified: `cuda` on GPUs, `cpu` under the Triton interpreter), `x.cuda()` becomes
  `x.to(_amdkv_device)` and `torch.cuda.synchronize()` a synchronisation of that device;
- TritonBench-G files run their test at import (`result_gold = test_x()`, sometimes under
  `if __name__ == "__main__":`) and some print it: those statements are removed, and the harness
  calls the tests itself, once per seeded trial;
- GEAK-eval's ROCm files import the benchmark's own timing package (`geak_eval`) for their
  performance tests, which amdkv does not run: those imports bind the names to None instead.

`analyse` says which tests to run, which names the tests bind (a candidate must not call into them),
which names they expect from the kernel part (the API a candidate must define), whether they draw
random inputs (so fresh seeds give fresh inputs) and what, if anything, makes them impossible to run
in amdkv's sandbox. Standard library only.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses

from amdkv.source_ast import module_bindings, parse as parse_source

DEVICE_NAME = "_amdkv_device"
SYNC_NAME = "_amdkv_synchronize"
CUDA_STRINGS = frozenset({"cuda", "cuda:0"})
# Calls that draw random values: tests that use them get fresh inputs from fresh seeds.
RANDOM_CALLS = frozenset({"randn", "rand", "randint", "randn_like", "rand_like", "randint_like", "normal",
                          "normal_", "uniform_", "randperm", "bernoulli", "multinomial", "exponential_"})
# The GEAK-eval ROCm runner's own pytest filter (`-k "not test_performance and not
# test_save_performance_results"`) plus its file-saving hook, whose job amdkv's harness does itself.
PYTEST_SKIPPED_SUBSTRINGS = ("test_performance", "test_save")
PROCESS_MODULES = frozenset({"multiprocessing", "subprocess", "concurrent"})


@dataclasses.dataclass(frozen=True)
class TestCodeInfo:
    tests: tuple[str, ...]               # test functions to run, in order
    bindings: tuple[str, ...]            # names the test code binds at module level
    self_named_imports: tuple[str, ...]  # of those, names bound only by `import m` / `import m.sub` (the name is `m`)
    api_names: tuple[str, ...]           # names the tests use that the kernel part must define
    fresh_inputs: bool                   # the tests draw random inputs (fresh seeds -> fresh inputs)
    unsupported: tuple[str, str] | None  # (reason code, explanation) when amdkv cannot run them


def _is_main_guard(node: ast.stmt) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__")


def _test_call(node: ast.stmt) -> str | None:
    """`test_x()` or `result = test_x()` as a statement: the test's name."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) else None
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.startswith("test_"):
        return value.func.id
    return None


def _is_print(node: ast.stmt) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "print")


def _bound_anywhere(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _test_defs(tree: ast.Module) -> list[ast.FunctionDef]:
    """Top-level `test_*` functions, one per name (a later definition replaces an earlier one, as in
    the module's namespace), in the order of their last definition."""
    defs: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            defs.pop(node.name, None)
            defs[node.name] = node
    return list(defs.values())


def _parametrized_names(fn: ast.FunctionDef) -> set[str]:
    names: set[str] = set()
    for dec in fn.decorator_list:
        if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == "parametrize":
            first = dec.args[0] if dec.args else next((k.value for k in dec.keywords if k.arg == "argnames"), None)
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.update(n.strip() for n in first.value.split(",") if n.strip())
            elif isinstance(first, (ast.List, ast.Tuple)):
                names.update(e.value for e in first.elts if isinstance(e, ast.Constant))
    return names


def analyse(test_source: str, style: str) -> TestCodeInfo:
    """`style`: "tritonbench" (tests called at import) or "pytest" (GEAK-eval's ROCm files)."""
    tree = parse_source(test_source)
    defs = _test_defs(tree)
    unsupported: tuple[str, str] | None = None
    if style == "tritonbench":
        called: list[str] = []
        for node in tree.body:
            for stmt in (node.body if _is_main_guard(node) else [node]):
                name = _test_call(stmt)
                if name and name not in called:
                    called.append(name)
        tests = called or [d.name for d in defs]
    else:
        tests = [d.name for d in defs if not any(s in d.name for s in PYTEST_SKIPPED_SUBSTRINGS)]
        for d in defs:
            if d.name not in tests:
                continue
            params = _parametrized_names(d) | {"request"}
            args = d.args.posonlyargs + d.args.args + d.args.kwonlyargs
            n_defaults = len(d.args.defaults)
            positional = d.args.posonlyargs + d.args.args
            with_default = {a.arg for a in positional[len(positional) - n_defaults:]} if n_defaults else set()
            with_default |= {a.arg for a, dflt in zip(d.args.kwonlyargs, d.args.kw_defaults) if dflt is not None}
            missing = [a.arg for a in args if a.arg not in params and a.arg not in with_default]
            if missing and unsupported is None:
                unsupported = ("benchmark_test_fixture",
                               f"test `{d.name}` needs pytest fixture(s) {missing}, which amdkv's harness does "
                               "not provide (it provides `request` and expands `parametrize`)")
    if not tests:
        unsupported = unsupported or ("no_benchmark_tests", "the test part defines no test_* function to run")
    imported: set[str] = set()
    loads: set[str] = set()
    forks = fresh = False
    for n in ast.walk(tree):  # one walk: files of thousands of lines, hundreds of them
        if isinstance(n, ast.Import):
            imported.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and n.module:
            imported.add(n.module.split(".")[0])
        elif isinstance(n, ast.Attribute):
            forks = forks or n.attr in ("fork", "system", "Popen")
            fresh = fresh or n.attr in RANDOM_CALLS
        elif isinstance(n, ast.Name):
            fresh = fresh or n.id in RANDOM_CALLS
            if isinstance(n.ctx, ast.Load):
                loads.add(n.id)
    spawns = sorted(imported & PROCESS_MODULES)
    if (spawns or forks) and unsupported is None:
        unsupported = ("benchmark_test_spawns_processes",
                       f"the benchmark's tests start processes ({', '.join(spawns) or 'os.fork'}); the candidate's "
                       "sandbox refuses process creation, and the tests run inside it")
    api = sorted(loads - _bound_anywhere(tree) - set(dir(builtins)) - {DEVICE_NAME, SYNC_NAME})
    return TestCodeInfo(tests=tuple(tests), bindings=tuple(sorted(module_bindings(tree))),
                        self_named_imports=tuple(sorted(self_named_imports(tree))),
                        api_names=tuple(api), fresh_inputs=fresh, unsupported=unsupported)


def self_named_imports(tree: ast.Module) -> set[str]:
    """Top-level names bound only by plain `import m` (or `import m.sub`): the name is the module's
    own, so a candidate using it means that module exactly as if it had imported it, and the static
    checks resolve it the same way (an alias, `import numpy as np`, or a rebinding does not count)."""
    by_import: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            by_import.update(a.name.split(".")[0] for a in node.names if a.asname is None)
    other = module_bindings(ast.Module(body=[n for n in tree.body if not isinstance(n, ast.Import)], type_ignores=[]))
    aliased = {a.asname for n in tree.body if isinstance(n, ast.Import) for a in n.names if a.asname}
    return by_import - other - aliased


class _DeviceToVerified(ast.NodeTransformer):
    """'cuda' constants, `.cuda()` and `torch.cuda.synchronize()` -> the device being verified."""

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return node  # literal parts of f-strings are text, not device names

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str) and node.value in CUDA_STRINGS:
            return ast.copy_location(ast.Name(DEVICE_NAME, ast.Load()), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args and not node.keywords:
            func.attr = "to"
            node.args = [ast.Name(DEVICE_NAME, ast.Load())]
        elif isinstance(func, ast.Attribute) and func.attr == "synchronize" and \
                ast.unparse(func.value) == "torch.cuda":
            node.func = ast.Name(SYNC_NAME, ast.Load())
            node.args, node.keywords = [], []
        return node


def transform(test_source: str, style: str, stub_modules: tuple[str, ...] = ("geak_eval",)) -> str:
    """The test code as amdkv runs it (see the module docstring)."""
    tree = parse_source(test_source)
    body: list[ast.stmt] = []
    for node in tree.body:
        if _is_main_guard(node):
            continue
        if style == "tritonbench" and (_test_call(node) or _is_print(node)):
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in stub_modules:
            names = [ast.Name(a.asname or a.name, ast.Store()) for a in node.names]
            node = ast.copy_location(ast.Assign(targets=names, value=ast.Constant(None)), node) if len(names) == 1 \
                else ast.copy_location(ast.Assign(targets=[ast.Tuple(names, ast.Store())],
                                                  value=ast.Tuple([ast.Constant(None)] * len(names), ast.Load())), node)
        elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in stub_modules for a in node.names):
            continue
        body.append(node)
    tree.body = body
    tree = _DeviceToVerified().visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"
