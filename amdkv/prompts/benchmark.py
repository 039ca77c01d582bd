"""The first user message of a task loaded from an external benchmark, built from the benchmark's own
instructions (docs/benchmarks.md, "Prompts: each benchmark's own instructions").

The loaders (`amdkv/tasks/external/`) read each benchmark's instruction text from the user's checkout
into `task.metadata["instruction"]`; amdkv ships none of it. `benchmark_message(task, config)` turns it
into the `write` request, as each benchmark's own harness would prompt a model, and returns None for
every other task (bundled and procedural tasks keep amdkv's own prompt, byte for byte):

- TritonBench-G: the instruction of `config.instruction_style` (`simp` or `comp`; None: `comp` when
  the task has it, else `simp`): the alpaca file's full prompt (`<style>_prompt`) when present, else
  the index's `<style>_instru`;
- ROCmBench: the `{"instruction": ...}` text of `?instructions=FILE`;
- either, without instruction text: a prompt built from the benchmark's kernel code: its imports and
  the signatures and docstrings of the names its tests call (bodies left out);
- KernelBench / PyTorch-to-HIP (when the checkout has `src/kernelbench/prompts/prompts.toml`): the
  problem statement, the one-shot pair (`few_shot_example_arch` and the backend's
  `one_shot_new_arch`), the task's architecture (its source) and the instruction, in the order of
  KernelBench's one-shot prompt, with `{backend_display}` filled for the config's language.

A kernel-file task's (TritonBench-G, ROCmBench) source is amdkv's generated task file (a
`reference_model(...)` stub): it is never shown. Its answer is kernel code, not a `ModelNew` program,
so its message ends with a short answer-format note of ours, and its replies are extracted with
`extract_code(..., api_names=kernel_api_names(task))`. amdkv's framing text (headings, the note) is
in `templates/_benchmark/<version>/`, frozen with the prompt version. amdkv's own few-shot examples
are not added (`shots` applies to amdkv's prompt only): the benchmark's prompt is reproduced as is.
"""

from __future__ import annotations

import ast
import copy
from typing import Any, Mapping

from amdkv.prompts import templates
from amdkv.prompts.extract import language_name
from amdkv.source_ast import module_bindings, parse as parse_source

INSTRUCTION_STYLES = ("simp", "comp")
# How messages name each benchmark (`task.metadata["benchmark"]`).
BENCHMARK_NAMES = {"tritonbench-g": "TritonBench-G", "rocmbench": "ROCmBench", "kernelbench": "KernelBench",
                   "pytorch2hip": "PyTorch-to-HIP"}
KERNELBENCH_FAMILY = ("kernelbench", "pytorch2hip")
# KernelBench's prompts.toml has no HIP backend at the commits read: a HIP prompt then says this, and
# shows the CUDA backend's one-shot example (a `load_inline` program, the form a HIP candidate takes).
HIP_BACKEND_DISPLAY = "HIP kernels"


def _meta(task: Any) -> Mapping[str, Any]:
    return getattr(task, "metadata", None) or {}


def is_kernel_file_task(task: Any) -> bool:
    """A task whose candidate is kernel code followed by the benchmark's tests (TritonBench-G, ROCmBench)."""
    return bool(_meta(task).get("candidate_program"))


def kernel_api_names(task: Any) -> tuple[str, ...] | None:
    """For a kernel-file task, the names its tests call that the benchmark's kernel code defines
    (not the modules it imports): what a reply's code must define. None for every other task."""
    meta = _meta(task)
    if not is_kernel_file_task(task):
        return None
    api = [str(n) for n in meta.get("api_names") or ()]
    defined, imported = _top_level_names(meta.get("reference_candidate") or "")
    own = [n for n in api if n in defined]
    return tuple(own or [n for n in api if n not in imported])


def _top_level_names(code: str) -> tuple[set[str], set[str]]:
    """(names bound at the top level of `code` other than by imports, names bound by imports)."""
    try:
        tree = parse_source(code)
    except (SyntaxError, ValueError):
        return set(), set()
    imported = {a.asname or a.name.split(".")[0] for node in tree.body
                if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    return module_bindings(tree) - imported, imported


def tritonbench_instruction(instruction: Mapping[str, Any] | None, style: str | None) -> str | None:
    """TritonBench-G's instruction text of `style` (`simp`/`comp`; None: `comp`, else `simp`): the full
    prompt (`<style>_prompt`) when present, else the index's `<style>_instru`; the other style when the
    task lacks the one asked for; None when it has none."""
    if not instruction:
        return None
    order = [style] if style else []
    order += [s for s in ("comp", "simp") if s not in order]
    for s in order:
        for key in (f"{s}_prompt", f"{s}_instru"):
            text = instruction.get(key)
            if isinstance(text, str) and text.strip():
                return text
    return None


def benchmark_message(task: Any, config: Any) -> str | None:
    """The `write` request's text from the task's benchmark instructions (see the module docstring),
    or None when the task carries none (amdkv's own prompt is used)."""
    if is_kernel_file_task(task):
        return _kernel_file_message(task, config)
    if _meta(task).get("benchmark") in KERNELBENCH_FAMILY:
        return _kernelbench_message(task, config)
    return None


def _benchmark_name(task: Any) -> str:
    benchmark = _meta(task).get("benchmark") or getattr(task, "suite", "")
    return BENCHMARK_NAMES.get(benchmark, benchmark)


# ------------------------------------------------------------------------- TritonBench-G, ROCmBench
def _kernel_file_message(task: Any, config: Any) -> str:
    meta = _meta(task)
    folder = templates.benchmark_templates(config.version)
    language = language_name(config.language)
    instruction = meta.get("instruction")
    if meta.get("benchmark") == "tritonbench-g":
        text = tritonbench_instruction(instruction, config.instruction_style)
    else:  # ROCmBench (GEAK's agent format), or any kernel-file benchmark with one instruction text
        text = instruction.get("instruction") if isinstance(instruction, Mapping) else None
        text = text if isinstance(text, str) and text.strip() else None
    api = kernel_api_names(task) or ()
    if text is None:
        text = templates.render("kernel_signature", folder, task_id=task.id, benchmark=_benchmark_name(task),
                                language_name=language,
                                signatures=kernel_signatures(meta.get("reference_candidate") or "", api).strip())
    names = ", ".join(f"`{n}`" for n in api) or "the functions of the benchmark's code"
    answer = templates.render("kernel_answer", folder, benchmark=_benchmark_name(task), api=names,
                              language_name=language)
    return templates.render("kernel_file", folder, instruction=text.strip(), answer_format=answer.strip())


def kernel_signatures(kernel: str, names: tuple[str, ...] | list[str]) -> str:
    """The imports of `kernel` and, for each top-level definition of one of `names` (every function
    and class when none is found), its decorators, signature and docstring with the body left out
    (`...`); classes keep their methods' signatures. Assignments to a name are shown as they are
    when they take one line."""
    try:
        tree = parse_source(kernel)
    except (SyntaxError, ValueError):
        return kernel  # nothing to take apart: the benchmark's code is shown as it is
    wanted = set(names)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if not any(isinstance(n, defs) and n.name in wanted for n in tree.body):
        wanted |= {n.name for n in tree.body if isinstance(n, defs)}
    out: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(ast.unparse(node))
        elif isinstance(node, defs) and node.name in wanted:
            out.append("\n" + ast.unparse(_stub(node)))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno == node.end_lineno:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in wanted for t in targets):
                out.append("\n" + ast.unparse(node))
    return "\n".join(out).strip() + "\n"


def _stub(node: ast.AST) -> ast.AST:
    """A definition with its body replaced by its docstring (if any) and `...`; a class keeps its
    methods, stubbed the same way."""
    doc = ast.get_docstring(node, clean=False)
    body: list[ast.stmt] = [ast.Expr(ast.Constant(doc))] if doc is not None else []
    if isinstance(node, ast.ClassDef):
        body += [_stub(m) for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))] \
            or [ast.Expr(ast.Constant(...))]
    else:
        body.append(ast.Expr(ast.Constant(...)))
    stub = copy.copy(node)
    stub.body = body
    return ast.fix_missing_locations(stub)


# --------------------------------------------------------------------- KernelBench, PyTorch-to-HIP
def _backend(material: Mapping[str, Any], language: str) -> tuple[str, str | None]:
    """(backend_display, one_shot_new_arch text) of the checkout's backend for `language`."""
    backends = material.get("backends") or {}
    own = backends.get(language) or {}
    if language == "hip" and not own.get("one_shot_new_arch"):
        cuda = backends.get("cuda") or {}
        return own.get("backend_display") or HIP_BACKEND_DISPLAY, cuda.get("one_shot_new_arch")
    return own.get("backend_display") or f"{language_name(language)} kernels", own.get("one_shot_new_arch")


def _kernelbench_message(task: Any, config: Any) -> str | None:
    material = _meta(task).get("instruction")
    if not isinstance(material, Mapping):
        return None
    statement, instruction = material.get("problem_statement"), material.get("instruction")
    if not any(isinstance(t, str) and t.strip() for t in (statement, instruction)):
        return None  # e.g. only the path of prompts.toml (no TOML reader): amdkv's own prompt
    folder = templates.benchmark_templates(config.version)
    display, new_arch = _backend(material, config.language)

    def fill(text: str | None) -> str:  # KernelBench's one placeholder, filled as its prompt constructor does
        return (text or "").replace("{backend_display}", display).strip()

    parts = [fill(statement)]
    example = material.get("few_shot_example_arch")
    if example and new_arch:
        parts.append(templates.render("kernelbench_example", folder, example_arch=example.strip(),
                                      example_new_arch=new_arch.strip(), backend_display=display).strip())
    parts.append(templates.render("kernelbench_arch", folder, arch_source=task.source.strip()).strip())
    parts.append(fill(instruction))
    return "\n\n".join(p for p in parts if p) + "\n"
