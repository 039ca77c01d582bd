"""The functional reference: TritonKernelGen's optional first stage ("module -> functional
reference checked against the module", DESIGN.md section 3).

What it means in amdkv: before any kernel is asked for, the model rewrites the task's
`Model.forward` as a top-level `module_fn(...)` written only with `torch` and
`torch.nn.functional`, every parameter and buffer of the module passed explicitly, and a `ModelNew`
(same constructor and forward signatures) whose forward calls `module_fn`. The program is verified
against the task by the verifier's own comparison under the `reference` policy (which lets plain
PyTorch compute through; the other rules still hold, e.g. using `Model` itself is refused). When it
is `ok`, the `write` request shows it after the task (`functional_addendum`): the kernel writer
then starts from a flat, explicit program whose equivalence with the module has been checked.

Off by default (`--functional-reference` turns it on): it costs one request and one verification
per task before any kernel, needs a local verifier (a second one, with the `reference` policy;
an `amdkv serve` service runs one policy), and most KernelBench-format `forward`s are short and
functional already. One attempt per task: a functional program that fails, or a reply without one,
leaves the `write` request as it is (the trajectory's metadata says what happened).

Its texts are versioned here (`FUNCTIONAL_PROMPT_VERSION`, recorded in every trajectory that used
it): the kernel prompts' `v1` templates are frozen and have no such stage.
"""

from __future__ import annotations

import ast
from typing import Any

from amdkv.source_ast import parse as parse_source

FUNCTIONAL_PROMPT_VERSION = "functional-v1"

FUNCTIONAL_SYSTEM = (
    "You rewrite PyTorch modules as functional PyTorch programs. Keep the arithmetic exactly the "
    "same (same operations, same order, same dtypes): the result is checked against the module "
    "on random inputs."
)

FUNCTIONAL_USER = """Rewrite `Model.forward` of this PyTorch program as a functional program:

```python
{task_source}
```

Write one Python program with:
- a top-level function `module_fn(...)` that takes the forward inputs and then every parameter and
  buffer the module uses, and computes the output with `torch` and `torch.nn.functional` calls only
  (no `nn.Module` layers called inside it, no `Model`);
- `class ModelNew(nn.Module)` whose `__init__` takes the same arguments as `Model.__init__` and
  creates the same parameters and buffers (same names, shapes and initialisation), and whose
  `forward` takes the same arguments as `Model.forward` and returns `module_fn(...)`.
Answer with the complete program in one ```python block."""

FUNCTIONAL_ADDENDUM = """
A functional version of `Model.forward`, checked against the module ({status} on {platform}):

```python
{code}
```
"""


def functional_messages(task: Any) -> list[dict[str, str]]:
    """The request for `task`'s functional program."""
    return [{"role": "system", "content": FUNCTIONAL_SYSTEM},
            {"role": "user", "content": FUNCTIONAL_USER.format(task_source=task.source.strip())}]


def defines_module_fn(code: str) -> bool:
    """True when `code` parses and defines a top-level `module_fn` (what the stage asks for)."""
    try:
        tree = parse_source(code)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "module_fn" for n in tree.body)


def functional_addendum(code: str, verdict: dict[str, Any]) -> str:
    """The text added to the `write` request's user message when the functional program passed."""
    return FUNCTIONAL_ADDENDUM.format(status=verdict.get("status"), platform=verdict.get("platform"),
                                      code=code.strip())
