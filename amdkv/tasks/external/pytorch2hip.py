"""`pytorch2hip:PATH` / `pytorch2hip:builtin`: PyTorch-to-HIP, the paper's Pass@1 setting.

The same PyTorch problems, scored for HIP candidates only: every task says `metadata["language"] =
"hip"`, so the verifier judges each candidate as a HIP program (`load_inline`); a Triton or pure
PyTorch candidate fails as a HIP program (`compile_error` / `no_hip_sources`), which is what Pass@1
over HIP means. PATH is a KernelBench checkout or folder (as for `kernelbench:`, with the same
`?levels=` / `?only=` options); `builtin` is amdkv's bundled suites (`builtin:all`), `builtin:NAME`
one of them (`builtin:eval`, `builtin:rocm`, ...). The benchmark's own rule for KernelBench problems
is KernelBench's; for bundled tasks the benchmark is amdkv's own, so it is amdkv's comparison.
"""

from __future__ import annotations

from amdkv.tasks.external import kernelbench
from amdkv.tasks.types import Task

PREFIX = "pytorch2hip"


def load(rest: str) -> list[Task]:
    extra = {"language": "hip"}
    if rest == "builtin" or rest.startswith("builtin:"):
        from amdkv.tasks.suites import load_suite

        tasks = load_suite("builtin:" + (rest.split(":", 1)[1] if ":" in rest else "all"))
        for t in tasks:
            t.metadata.update({"benchmark": PREFIX, "reference_candidate": kernelbench.reference_candidate(t.source),
                               **extra})
        return tasks
    root, problems, _ = kernelbench.load_problems(rest, PREFIX)
    repo_root = kernelbench.repo_root_of(root)
    instruction = kernelbench.prompt_material(repo_root)
    return [kernelbench.problem_task(root, lv, f, benchmark=PREFIX, repo_root=repo_root,
                                     instruction=instruction, extra=extra) for lv, f in problems]
