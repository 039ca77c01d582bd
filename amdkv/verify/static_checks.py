"""Static (AST) anti-hack checks on a candidate's source, run in the trusted parent.

These give early, precise reasons for the common cheats; the dynamic checks in the candidate's
process and the parent's output comparison catch what static analysis cannot see. Each rule
is written against the AST, not regexes, so comments and strings never trigger it and
aliases (`import torch.nn.functional as F`, `from torch import matmul`) are followed.
"""

from __future__ import annotations

import ast
import dataclasses
from functools import lru_cache

from amdkv.source_ast import mentions  # noqa: F401  (verifier.py calls static_checks.mentions)
from amdkv.source_ast import parse as parse_source

# Modules a candidate may import (prefix match on dotted names). Everything else is refused:
# process/network/file/introspection modules are how a candidate escapes the harness.
ALLOWED_IMPORT_ROOTS = frozenset({
    "torch", "triton", "math", "typing", "typing_extensions", "functools", "itertools",
    "collections", "dataclasses", "enum", "numbers", "operator", "warnings", "abc", "os", "sys",
    "__future__", "cmath", "contextlib", "copy", "string", "re",
})
# Submodules of allowed roots that are still refused (file/process/harness access).
HIP_BUILD_API = frozenset({"torch.utils.cpp_extension", "torch.utils.cpp_extension.load_inline",
                           "torch.utils.cpp_extension.load"})
DENIED_IMPORTS = frozenset({
    "torch.testing", "torch.utils.cpp_extension", "torch._dynamo", "torch.compiler",
    "torch.multiprocessing", "torch.distributed", "torch.hub", "torch.serialization",
    "torch._C", "torch._inductor", "triton.testing", "torch.utils._python_dispatch",
    "torch.overrides", "os.path",
    # the interpreter's own machinery, which the harness patches to check a kernel's memory
    # accesses (interpreter_bounds.py), and the C module behind it
    "triton.runtime.interpreter", "triton._C",
})
# Always refused as unbound globals, whatever the installed interpreter's source says: the names
# the bounds checker patches, and numpy (see interpreter_internal_names).
INTERPRETER_PATCHED_NAMES = frozenset({"_interpreter", "GridExecutor", "InterpretedFunction",
                                       "interpreter_builder", "np"})
# Calls that execute code, touch files or break out of the harness.
DENIED_BUILTIN_CALLS = frozenset({
    "eval", "exec", "compile", "__import__", "open", "globals", "vars", "breakpoint", "input",
    "setattr", "delattr",
})
DENIED_OS_ATTRS = frozenset({
    "system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execvp",
    "execvpe", "spawnl", "spawnv", "spawnve", "posix_spawn", "posix_spawnp", "open", "fdopen",
    "read", "write", "listdir", "scandir", "walk", "remove", "unlink", "rename", "replace",
    "chdir", "putenv", "unsetenv", "kill", "killpg", "getppid",
})
DENIED_SYS_ATTRS = frozenset({"modules", "_getframe", "settrace", "setprofile", "addaudithook",
                              "meta_path", "path_hooks", "stdout", "stderr", "exit", "_current_frames"})
DENIED_DUNDERS = frozenset({"__globals__", "__code__", "__builtins__", "__subclasses__",
                            "__closure__", "__dict__", "__getattribute__", "__loader__", "__spec__",
                            "__class__", "__bases__", "__mro__", "__import__", "f_back", "f_globals",
                            "gi_frame", "tb_frame", "__self__", "__func__", "__reduce__", "__reduce_ex__"})
# getattr/setattr-like lookups whose attribute name is computed at run time hide every rule above.
NAME_LOOKUPS = frozenset({"getattr", "hasattr", "attrgetter", "methodcaller"})
# File readers reached through torch/numpy.
DENIED_CALL_PATHS = frozenset({"torch.load", "torch.save", "torch.from_file", "torch.ops.load_library",
                               "torch.classes.load_library"})
# Names of torch's C-level file readers: they bypass the audit hook that guards `open()`.
NATIVE_FILE_READERS = frozenset({"from_file", "PyTorchFileReader", "PyTorchFileWriter"})
# Tensor methods that compute (not allocate/move); calling them in Python code means the
# result is being computed by PyTorch. Kept to unambiguous tensor names so that list/set
# methods (`sort`, `add`, `index`, `copy`) never trigger it; the dynamic recorder sees the rest.
TENSOR_COMPUTE_METHODS = frozenset({
    "sum", "mean", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax", "matmul", "mm",
    "bmm", "addmm", "baddbmm", "relu", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "cumsum",
    "cumprod", "topk", "norm", "var", "std", "prod", "pow", "abs", "clamp", "clamp_min", "clamp_max",
    "mul", "sub", "div", "gather", "scatter", "scatter_add", "index_select", "masked_fill",
    "einsum", "gelu", "silu", "softplus", "logsumexp", "maximum", "minimum", "square", "neg",
    "reciprocal", "erf", "sin", "cos", "where", "lerp", "addcmul", "addcdiv", "outer", "dot",
    "mv", "conv1d", "conv2d", "layer_norm", "group_norm", "embedding", "tril", "triu", "flip",
    "roll", "argsort", "max", "min", "numpy", "add_", "mul_", "div_", "sub_", "exp_",
    "relu_", "clamp_", "masked_fill_", "index_add", "index_add_", "index_put", "index_put_",
    "scatter_", "scatter_add_", "scatter_reduce", "bincount", "histc", "unique", "nonzero",
    "cross_entropy", "nll_loss", "mse_loss", "linear", "sign", "logical_and", "logical_or",
})
# Harmless exceptions a try/except may catch inside functions (lookups, optional imports).
NARROW_EXCEPTIONS = frozenset({"KeyError", "IndexError", "AttributeError", "ImportError",
                               "ModuleNotFoundError", "StopIteration", "LookupError"})
# Only `Verdict` reason codes that stand for a missing or malformed candidate (bad input).
SYNTAX_ERROR = "syntax_error"


@dataclasses.dataclass
class Finding:
    code: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.code}] {self.message}"


@lru_cache(maxsize=1)
def _aten_compute_names() -> frozenset[str]:
    """Names of `torch.X` functions that are aten compute ops (allocation/view ops excluded)."""
    import torch

    from amdkv.verify.runtime_guards import ALLOWED_ATEN_OPS
    names = set()
    for name in dir(torch):
        if name.startswith("_") or name in ALLOWED_ATEN_OPS:
            continue
        if hasattr(torch.ops.aten, name) and callable(getattr(torch, name, None)):
            names.add(name)
    return frozenset(names)


def _refused_module(mod: str) -> bool:
    """True when a candidate may not import the dotted module `mod`."""
    return mod.split(".")[0] not in ALLOWED_IMPORT_ROOTS or \
        any(mod == d or mod.startswith(d + ".") for d in DENIED_IMPORTS)


def candidate_may_import(mod: str) -> bool:
    """Whether a candidate may import the dotted module `mod` (any task; a task may allow more)."""
    return not _refused_module(mod)


@lru_cache(maxsize=1)
def interpreter_internal_names() -> frozenset[str]:
    """Names Triton's interpreter copies into the globals of every module whose kernel it runs.

    `FunctionRewriter._compile_and_exec` (triton 3.6-3.9) adds each global of
    `triton.runtime.interpreter` that the kernel's module lacks, so after its first launch a
    candidate could use `GridExecutor`, `_interpreter` (the memory functions the bounds checker
    guards) or `np` without importing anything. Read from the installed interpreter's source (no
    import): its functions, classes and assignments, and whatever it imported from modules a
    candidate may not import. Names it imported from allowed modules (`tl`, `math`, `List`) are
    the same objects a candidate may import itself, so they stay usable.
    """
    import importlib.util
    from pathlib import Path

    names = set(INTERPRETER_PATCHED_NAMES)
    spec = importlib.util.find_spec("triton")  # finds the package without importing it
    if spec is None or not spec.origin:
        return frozenset(names)
    try:
        tree = parse_source((Path(spec.origin).parent / "runtime" / "interpreter.py").read_text())
    except (OSError, SyntaxError):
        return frozenset(names)
    package = ["triton", "runtime"]
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if isinstance(node, ast.Import):
                    mod = alias.name
                else:
                    base = package[:len(package) - node.level + 1] if node.level else []
                    mod = ".".join(base + ([node.module] if node.module else []))
                if _refused_module(mod):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


def _bound_names(body: list[ast.stmt], params: ast.arguments | None = None) -> set[str]:
    """Names a scope binds itself (Python makes them local to the whole scope): parameters,
    assignment/loop/with/except targets, imports, nested def and class names; nested functions,
    classes and comprehensions are their own scopes. Names declared `global` are not local."""
    names: set[str] = set()
    declared_global: set[str] = set()
    if params is not None:
        names.update(a.arg for a in params.posonlyargs + params.args + params.kwonlyargs)
        names.update(a.arg for a in (params.vararg, params.kwarg) if a is not None)
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared_global


def _unconditional_module_names(tree: ast.Module) -> set[str]:
    """Names the module body binds by statements that always run at import (not under if/try/for/
    with): the only module-level bindings that certainly exist before the interpreter's first
    launch adds its own globals to the module."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` -> 'a.b.c' for Name/Attribute chains, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _is_jit_decorator(dec: ast.AST, aliases: dict[str, str]) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target)
    if name is None:
        return False
    full = _resolve(name, aliases)
    return full in ("triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit",
                    "triton.runtime.autotune", "triton.runtime.heuristics")


def _resolve(name: str, aliases: dict[str, str]) -> str:
    head, _, rest = name.partition(".")
    base = aliases.get(head, head)
    return f"{base}.{rest}" if rest else base


class _Checker(ast.NodeVisitor):
    def __init__(self, language: str, extra_imports: frozenset[str] = frozenset()) -> None:
        self.language = language
        self.extra_imports = extra_imports  # modules a task allows its candidates beyond the list
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}      # local name -> fully qualified module/attr
        self.module_names: set[str] = set()    # local names bound to imported modules/attrs
        self.jit_functions: set[str] = set()
        self.func_depth = 0
        self.func_stack: list[str] = []
        self.in_jit = 0
        self.in_model_new = 0
        self.has_model_new = False
        self.model_new_node: ast.ClassDef | None = None
        self.hip_extensions: set[str] = set()  # names bound to load_inline(...) results (HIP)
        self.interpreter_names = interpreter_internal_names()
        self.module_bound: set[str] = set()    # names the module binds unconditionally (see check_source)
        self.scopes: list[tuple[str, set[str]]] = []  # enclosing function/class/comprehension scopes

    def add(self, code: str, node: ast.AST, message: str) -> None:
        self.findings.append(Finding(code, getattr(node, "lineno", 0), message))

    # imports ------------------------------------------------------------------------------
    def _hip_build_api(self, full: str) -> bool:
        """HIP candidates build their kernels with cpp_extension's load_inline/load (run by the
        harness's own build step, never by the candidate: backends/hip_gpu.py)."""
        return self.language == "hip" and full in HIP_BUILD_API

    def _extra_allowed(self, mod: str) -> bool:
        """A task's extra import allows itself and what lies below it, but reopens a refused module
        only when it names that module or something inside it: `torch.testing` from a benchmark's
        kernel file allows `torch.testing`, while `triton` (which every kernel file imports) must
        not allow `triton._C` or `triton.runtime.interpreter`."""
        def under(name: str, root: str) -> bool:
            return name == root or name.startswith(root + ".")

        denied = [d for d in DENIED_IMPORTS if under(mod, d)]
        return any(under(mod, e) and all(under(e, d) for d in denied) for e in self.extra_imports)

    def _check_module(self, mod: str, node: ast.AST) -> None:
        if self._hip_build_api(mod) or self._extra_allowed(mod) or not _refused_module(mod):
            return
        if mod.split(".")[0] not in ALLOWED_IMPORT_ROOTS:
            self.add("import_not_allowed", node, f"imports `{mod}`; candidates may import only "
                     f"{sorted(ALLOWED_IMPORT_ROOTS)}")
        else:
            self.add("import_not_allowed", node, f"imports `{mod}`, which can reach files, processes "
                     "or the harness")

    # names the Triton interpreter leaks into the candidate's module -----------------------
    def _leaked_interpreter_name(self, name: str, node: ast.AST) -> None:
        self.add("import_not_allowed", node, f"uses `{name}`, which the candidate never binds: it "
                 "exists only because the Triton interpreter copies its own globals "
                 "(triton.runtime.interpreter) into kernel modules; the interpreter's machinery "
                 "and numpy are not for candidates")

    def _refers_to_leaked_global(self, name: str) -> bool:
        """A load of `name` here reads a module global the interpreter may have supplied."""
        if name not in self.interpreter_names or name in self.module_bound:
            return False
        for depth, (kind, names) in enumerate(reversed(self.scopes)):
            if kind == "class" and depth > 0:
                continue  # a class body's names are invisible to the functions inside it
            if name in names:
                return False
        return True

    def _scoped(self, kind: str, names: set[str], node: ast.AST) -> None:
        self.scopes.append((kind, names))
        self.generic_visit(node)
        self.scopes.pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._scoped("function", _bound_names([], node.args), node)

    def _visit_comprehension(self, node: ast.AST) -> None:
        targets = {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
        self._scoped("function", targets, node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(a.name, node)
            local = a.asname or a.name.split(".")[0]
            self.aliases[local] = a.name if a.asname else a.name.split(".")[0]
            self.module_names.add(local)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.add("import_not_allowed", node, "relative imports reach files beside the candidate")
            return
        mod = node.module or ""
        for a in node.names:
            full = f"{mod}.{a.name}"
            self._check_module(full if mod in ("torch", "triton", "os", "sys") else mod, node)
            self.aliases[a.asname or a.name] = full
            self.module_names.add(a.asname or a.name)

    # definitions --------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew" and self.func_depth == 0:
            self.has_model_new = True
            self.model_new_node = node
            for base in node.bases:
                if _dotted(base) == "Model":
                    self.add("uses_reference_model", node, "ModelNew subclasses the reference `Model`")
        if node.name == "Model":
            self.add("uses_reference_model", node, "the candidate defines a class named `Model` "
                     "(the reference program's name); candidates must not carry the reference")
        self.in_model_new += node.name == "ModelNew"
        self._scoped("class", _bound_names(node.body), node)
        self.in_model_new -= node.name == "ModelNew"

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        is_jit = any(_is_jit_decorator(d, self.aliases) for d in node.decorator_list)
        if is_jit:
            self.jit_functions.add(node.name)
        self.func_depth += 1
        self.func_stack.append(node.name)
        self.in_jit += is_jit
        for dec in node.decorator_list:  # decorators and defaults run in the enclosing scope
            self.visit(dec)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(default)
        self.scopes.append(("function", _bound_names(node.body, node.args)))
        for stmt in node.body:
            self.visit(stmt)
        for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs:
            if arg.annotation is not None:
                self.visit(arg.annotation)
        if node.returns is not None:
            self.visit(node.returns)
        self.scopes.pop()
        self.in_jit -= is_jit
        self.func_stack.pop()
        self.func_depth -= 1

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    # statements ---------------------------------------------------------------------------
    def _assign_target(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            base = target.value if isinstance(target, ast.Subscript) else target
            name = _dotted(base if isinstance(base, ast.Attribute) else target.value) \
                if isinstance(target, ast.Subscript) else _dotted(target)
            if name:
                head = name.split(".")[0]
                full = _resolve(name, self.aliases)
                if head in self.module_names and not full.startswith("os.environ"):
                    self.add("patches_module", node, f"assigns to `{full}`: patching library "
                             "functions, timers or comparisons is not allowed")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._assign_target(elt, node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._assign_target(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assign_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._assign_target(t, node)
            if isinstance(t, ast.Name) and t.id in self.interpreter_names:
                # deleting a global lets the interpreter's copy of that name take its place
                self._leaked_interpreter_name(t.id, node)
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        # Module-level state written from forward is how output caching across calls is done.
        if self.func_depth and self.in_model_new:
            self.add("global_state", node, f"`global {', '.join(node.names)}` inside ModelNew: "
                     "state kept across calls is how outputs get cached")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if self.func_depth:
            for h in node.handlers:
                if self._broad_handler(h) and not self._reraises(h) and not self._relaunches_smaller(h):
                    self.add("swallowing_try_except", h, "a try/except inside a function catches "
                             f"`{ast.unparse(h.type) if h.type else 'everything'}` without re-raising: "
                             "kernel failures must surface, not fall back")
            exit_stmt = _flow_exit_in(node.finalbody)
            if exit_stmt is not None:
                # `return`/`break`/`continue` in `finally` discards whatever exception is in flight,
                # exactly like a bare `except: pass` (Python 3.14 warns about it for that reason)
                self.add("swallowing_try_except", exit_stmt, f"`{ast.unparse(exit_stmt).split()[0]}` inside "
                         "`finally` discards any exception in flight: kernel failures must surface")
        self.generic_visit(node)

    visit_TryStar = visit_Try

    @staticmethod
    def _broad_handler(h: ast.ExceptHandler) -> bool:
        if h.type is None:
            return True
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        return any((_dotted(t) or "").split(".")[-1] not in NARROW_EXCEPTIONS for t in types)

    @staticmethod
    def _reraises(h: ast.ExceptHandler) -> bool:
        return bool(h.body) and isinstance(h.body[-1], ast.Raise)

    @staticmethod
    def _relaunches_smaller(h: ast.ExceptHandler) -> bool:
        """`except triton.OutOfResources:` whose body launches a kernel again (`k[grid](...)`, with
        smaller blocks): Triton's own retry pattern, not a fallback. The catch is that narrow (only
        shared memory or registers running out raise it), the result still comes from a kernel and is
        compared like any other; a PyTorch computation in the handler is refused by the other checks.
        TritonBench-G's attention_fwd_triton3 does this, and its reference was `hack_detected`."""
        if h.type is None:
            return False
        types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if not all((_dotted(t) or "").split(".")[-1] == "OutOfResources" for t in types):
            return False
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                   for stmt in h.body for n in ast.walk(stmt))

    def visit_With(self, node: ast.With) -> None:
        if self.func_depth:
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and (_dotted(call.func) or "").split(".")[-1] == "suppress" \
                        and any((_dotted(a) or "").split(".")[-1] not in NARROW_EXCEPTIONS for a in call.args):
                    self.add("swallowing_try_except", node, f"`{ast.unparse(call)}` inside a function swallows "
                             "broad exceptions: kernel failures must surface, not fall back")
        self.generic_visit(node)

    visit_AsyncWith = visit_With

    # expressions --------------------------------------------------------------------------
    _inner_attribute = False

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in DENIED_DUNDERS:
            self.add("introspection", node, f"uses `.{node.attr}`: reaching into frames, globals "
                     "or class internals is not allowed")
        name = _dotted(node)
        if name:
            full = _resolve(name, self.aliases)
            parts = full.split(".")
            if parts[0] == "sys" and len(parts) > 1 and parts[1] in DENIED_SYS_ATTRS and parts[1] != "exit":
                self.add("introspection", node, f"uses `{full}`")
            # A refused module reached as an attribute of an allowed one is the same thing as
            # importing it: `torch.utils._python_dispatch._pop_mode_temporarily()` stepped out of
            # the harness's op recorder; `torch._C` storage classes read files in C. Only the
            # outermost attribute of a chain is checked, so one use gives one finding.
            denied = next((d for d in DENIED_IMPORTS if full == d or full.startswith(d + ".")), None)
            if denied and not self._inner_attribute and not self._hip_build_api(full) \
                    and not self._extra_allowed(full):
                self.add("import_not_allowed", node, f"uses `{full}`: `{denied}` can reach files, "
                         "processes or the harness")
            # torch's C-level file readers (mmap), whatever they are reached through
            # (`torch.UntypedStorage.from_file`, `torch.FloatStorage.from_file`, ...).
            if parts[-1] in NATIVE_FILE_READERS:
                self.add("file_access", node, f"uses `{full}`: candidates may not read files")
            # the interpreter leaks its globals into every module whose kernel it runs, triton's
            # own (`tl.standard.GridExecutor` after a launch that used a standard-library kernel)
            leaked = next((p for p in parts[1:] if p in self.interpreter_names), None)
            if leaked and parts[0] in self.module_names and not self._inner_attribute and not denied:
                self._leaked_interpreter_name(f"{full}", node)
        prev, self._inner_attribute = self._inner_attribute, isinstance(node.value, ast.Attribute)
        self.generic_visit(node)
        self._inner_attribute = prev

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("__builtins__", "__loader__", "__spec__"):
            self.add("introspection", node, f"uses `{node.id}`")
        if isinstance(node.ctx, ast.Load) and self._refers_to_leaked_global(node.id):
            self._leaked_interpreter_name(node.id, node)
        if node.id == "Model" and isinstance(node.ctx, ast.Load):
            self.add("uses_reference_model", node, "refers to the reference `Model`")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and self._in_compute_scope:
            self.add("torch_fallback", node, "uses the `@` operator outside a kernel: the matmul is "
                     "computed by PyTorch")
        self.generic_visit(node)

    @property
    def _in_compute_scope(self) -> bool:
        """Python code that runs per forward: inside a function, not a kernel, not __init__
        (parameter initialisation with torch ops in __init__ is legitimate)."""
        return bool(self.func_depth) and not self.in_jit and "__init__" not in self.func_stack

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _dotted(func)
        lookup = func.id if isinstance(func, ast.Name) else (func.attr if isinstance(func, ast.Attribute) else None)
        if lookup in NAME_LOOKUPS:
            name_arg = node.args[1] if lookup in ("getattr", "hasattr") and len(node.args) > 1 else \
                (node.args[0] if node.args and lookup not in ("getattr", "hasattr") else None)
            if name_arg is not None and not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)):
                self.add("introspection", node, f"`{lookup}` with a computed attribute name: attribute "
                         "names must be literal so the rules can see them")
            elif isinstance(name_arg, ast.Constant) and (name_arg.value in DENIED_DUNDERS
                                                         or name_arg.value.startswith("__")):
                self.add("introspection", node, f"`{lookup}(..., {name_arg.value!r})`")
            elif isinstance(name_arg, ast.Constant) and name_arg.value in self.interpreter_names:
                self._leaked_interpreter_name(name_arg.value, node)
        if isinstance(func, ast.Name) and func.id in DENIED_BUILTIN_CALLS and func.id not in self.aliases:
            code = "file_access" if func.id == "open" else "dynamic_code"
            self.add(code, node, f"calls `{func.id}()`")
        if name:
            full = _resolve(name, self.aliases)
            parts = full.split(".")
            if full in DENIED_CALL_PATHS or (parts[0] == "numpy" and parts[-1] in ("load", "fromfile")):
                self.add("file_access", node, f"calls `{full}()`: candidates may not read files")
            if parts[0] == "os" and len(parts) == 2 and parts[1] in DENIED_OS_ATTRS:
                self.add("process_or_file_access", node, f"calls `{full}()`")
            if parts[0] == "pathlib" or parts[-1] in ("read_text", "read_bytes", "write_text", "write_bytes"):
                self.add("file_access", node, f"calls `{full}()`")
            if self._in_compute_scope and self._is_torch_compute(parts):
                self.add("torch_fallback", node, f"calls `{full}()` outside a kernel: the result is "
                         "computed by PyTorch, not by the candidate's kernels")
        if (self._in_compute_scope and isinstance(func, ast.Attribute)
                and func.attr in TENSOR_COMPUTE_METHODS and self._receiver_is_tensorish(func.value)):
            self.add("torch_fallback", node, f"calls tensor method `.{func.attr}()` outside a kernel")
        self.generic_visit(node)

    def _receiver_is_tensorish(self, value: ast.AST) -> bool:
        """Method calls on modules (`tl.max`, `math.sqrt`) and literals are not tensor compute."""
        if isinstance(value, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)):
            return False
        name = _dotted(value)
        if name is not None and name.split(".")[0] in self.module_names:
            return False
        if name is not None and name in self.hip_extensions:  # functions of a HIP extension
            return False
        return True

    def _is_torch_compute(self, parts: list[str]) -> bool:
        if is_torch_compute_path(parts):
            return True
        # Building an nn module (nn.Linear, nn.Conv2d...) anywhere but __init__ means calling it.
        if parts[1:2] == ["nn"] and len(parts) == 3 and parts[2][:1].isupper() and self.in_model_new \
                and self.func_stack and self.func_stack[-1] != "__init__":
            return True
        return False


def is_torch_compute_path(parts: list[str]) -> bool:
    """`torch.nn.functional.X` or a `torch.X` that is an aten compute op (allocation/view excluded)."""
    if parts[0] != "torch":
        return False
    if parts[1:3] == ["nn", "functional"] and len(parts) == 4:
        return True
    return len(parts) == 2 and parts[1] in _aten_compute_names()


def torch_compute_name(name: str, aliases: dict[str, str]) -> str | None:
    """The fully qualified name when dotted `name` (through import `aliases`) is a PyTorch compute op."""
    full = _resolve(name, aliases)
    return full if is_torch_compute_path(full.split(".")) else None


def check_source(source: str, *, language: str = "triton", filename: str = "<candidate>",
                 extra_imports: frozenset[str] | set[str] = frozenset()) -> list[Finding]:
    """All static findings for a candidate's source (empty list: nothing suspicious seen).
    `extra_imports`: modules this task allows beyond ALLOWED_IMPORT_ROOTS (a benchmark whose own
    kernel files import them, verify/program.py)."""
    try:
        tree = parse_source(source, filename=filename)
    except SyntaxError as exc:
        return [Finding(SYNTAX_ERROR, exc.lineno or 0, f"syntax error: {exc.msg}")]
    checker = _Checker(language, frozenset(extra_imports))
    checker.module_bound = _unconditional_module_names(tree)
    if language == "hip":
        checker.hip_extensions = _hip_extension_names(tree)
    checker.visit(tree)
    findings = list(checker.findings)
    if language == "triton" and not checker.jit_functions:
        findings.append(Finding("no_kernel", 0, "no `@triton.jit` kernel is defined: the work must be "
                                "done in a Triton kernel"))
    return findings


def _hip_extension_names(tree: ast.AST) -> set[str]:
    """Dotted names assigned from `load_inline(...)`/`load(...)` (`ext`, `self.ext`)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            fn = _dotted(node.value.func) or ""
            if fn.split(".")[-1] in ("load_inline", "load"):
                names.update(n for n in (_dotted(t) for t in node.targets) if n)
    return names


def has_model_new(source: str) -> bool:
    try:
        tree = parse_source(source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def forward_parameters(source: str, class_name: str) -> list[str] | None:
    """Positional parameter names of `class_name.forward` (without self), or None if absent."""
    try:
        tree = parse_source(source)
    except SyntaxError:
        return None
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name == class_name:
            for f in n.body:
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "forward":
                    args = f.args
                    if args.vararg is not None:
                        return ["*"]
                    return [a.arg for a in (args.posonlyargs + args.args)][1:]
    return None


def _flow_exit_in(body: list[ast.stmt]) -> ast.stmt | None:
    """The first `return`, `break` or `continue` of a `finally` body that leaves it (statements of
    nested functions and classes, and loops' own break/continue, do not)."""
    def walk(stmts: list[ast.stmt], in_loop: bool) -> ast.stmt | None:
        for st in stmts:
            if isinstance(st, ast.Return) or (isinstance(st, (ast.Break, ast.Continue)) and not in_loop):
                return st
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            loop = isinstance(st, (ast.For, ast.AsyncFor, ast.While))
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(st, field, None)
                if not inner:
                    continue
                if field == "handlers":
                    inner = [s for h in inner for s in h.body]
                found = walk(inner, in_loop or (loop and field == "body"))
                if found is not None:
                    return found
            if isinstance(st, ast.Match):
                for case in st.cases:
                    found = walk(case.body, in_loop)
                    if found is not None:
                        return found
        return None
    return walk(body, False)
