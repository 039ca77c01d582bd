"""`kernelbench:PATH`: KernelBench problems as amdkv tasks (docs/benchmarks.md).

PATH is a checkout of ScalingIntelligence/KernelBench (problems in `KernelBench/level1` ...
`level4`), its `KernelBench/` folder, one `levelN` folder, or any folder of files in the same format
(`Model`, `get_inputs`, `get_init_inputs`): that is amdkv's own task format, so the files load as
they are. Task ids are `levelN/<file stem>`. Candidates define `ModelNew` in Triton, or in HIP/CUDA
through `load_inline`.

KernelBench's references are plain PyTorch, which amdkv-strict rejects as `hack_detected`: the
reference-as-candidate sanity run uses the `reference` policy (docs/benchmarks.md). Each task keeps
that candidate in `metadata["reference_candidate"]` (the file with `Model` renamed `ModelNew`).

KernelBench builds its prompts from `src/kernelbench/prompts/prompts.toml` and example files; when
PATH is the repository root, their text goes into `metadata["instruction"]` (docs/benchmarks.md,
"Prompts"). Options: `?levels=1,2`, `?only=1_Square_matrix_multiplication_,19_ReLU`.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError
from amdkv.tasks.external import common
from amdkv.tasks.loader import load_task_and_module
from amdkv.tasks.types import Task

PREFIX = "kernelbench"
LEVEL_DIR = re.compile(r"^level(\d+)$")
# KernelBench's rule (src/kernelbench/eval.py): torch.allclose with atol = rtol = 1e-4 at its default
# fp32 precision, every correctness trial; shapes must match.
BENCHMARK_RULE = {"name": "KernelBench: torch.allclose(atol=1e-4, rtol=1e-4) (fp32)", "kind": "allclose",
                  "atol": 1e-4, "rtol": 1e-4, "check_dtype": False, "equal_nan": False}


def level_folders(root: Path, opts: dict[str, str]) -> list[tuple[int, Path]]:
    """(level, folder) pairs named by PATH and `?levels=`."""
    match = LEVEL_DIR.match(root.name)
    if match and root.is_dir():
        found = [(int(match.group(1)), root)]
    else:
        base = root / "KernelBench" if (root / "KernelBench").is_dir() else root
        found = sorted((int(m.group(1)), d) for d in base.iterdir() if d.is_dir()
                       for m in [LEVEL_DIR.match(d.name)] if m) if base.is_dir() else []
        if not found and base.is_dir() and common.benchmark_files(base):
            found = [(0, base)]
    if opts.get("levels"):
        wanted = {int(x) for x in opts["levels"].split(",") if x.strip().isdigit()}
        found = [(lv, d) for lv, d in found if lv in wanted]
    if not found:
        raise BadInputError(f"{PREFIX}: no KernelBench problems under {root}",
                            hint="pass the KernelBench checkout, its KernelBench/ folder or one levelN folder")
    return found


def reference_candidate(source: str) -> str:
    """The problem file as a candidate: every `Model` identifier renamed `ModelNew` (tokens, so a
    word in a comment or string stays as it is)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == "Model":
            tok = tok._replace(string="ModelNew")
        out.append(tok)
    return tokenize.untokenize(out)


def _problem_sort_key(path: Path) -> tuple[int, str]:
    head = path.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else 10 ** 9, path.stem)


def prompt_material(root: Path) -> dict[str, Any] | None:
    """KernelBench's prompt templates and examples from the checkout (text read at load time)."""
    toml_path = root / "src" / "kernelbench" / "prompts" / "prompts.toml"
    if not toml_path.is_file():
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        return {"prompts_toml": str(toml_path)}
    conf = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    shared = conf.get("shared", {})

    def text(rel: str | None) -> str | None:
        return (root / rel).read_text(encoding="utf-8") if rel and (root / rel).is_file() else None

    backends = {name: {"backend_display": b.get("backend_display"), "one_shot_new_arch": text(b.get("one_shot_new_arch"))}
                for name, b in conf.get("backends", {}).items() if name in ("triton", "hip", "cuda")}
    return {"prompts_toml": str(toml_path), "problem_statement": shared.get("problem_statement"),
            "instruction": shared.get("instruction"), "few_shot_example_arch": text(shared.get("few_shot_example_arch")),
            "backends": backends}


def load_problems(rest: str, prefix: str) -> tuple[Path, list[tuple[int, Path]], dict[str, str]]:
    """(root, [(level, problem file)], options) for a KernelBench-format spec."""
    root, opts = common.parse_spec(rest, prefix, ("levels", "only"))
    problems = []
    for level, folder in level_folders(root, opts):
        problems += [(level, f) for f in sorted(common.benchmark_files(folder), key=_problem_sort_key)]
    if opts.get("only"):
        wanted = {n.strip().removesuffix(".py") for n in opts["only"].split(",") if n.strip()}
        problems = [(lv, f) for lv, f in problems if f.stem in wanted or f"level{lv}/{f.stem}" in wanted]
    if not problems:
        raise BadInputError(f"{prefix}: no problem files selected under {root}", hint="check ?levels= / ?only=")
    return root, problems, opts


def problem_task(root: Path, level: int, path: Path, *, benchmark: str, repo_root: Path,
                 instruction: dict[str, Any] | None, extra: dict[str, Any] | None = None) -> Task:
    """One problem file as a Task of suite `benchmark` (KernelBench's files are amdkv's format)."""
    task_id = f"level{level}/{path.stem}" if level else path.stem
    task, module = load_task_and_module(path, suite=benchmark, task_id=task_id)
    prov = common.provenance("KernelBench", "ScalingIntelligence/KernelBench", repo_root, path)
    task.level = level or None
    task.licence = common.detect_licence(path.parent, repo_root) or "MIT"
    task.provenance = common.provenance_text(prov)
    task.description = f"KernelBench level {level}: {path.stem}"
    task.metadata.update({"benchmark": benchmark, "benchmark_rule": BENCHMARK_RULE, "provenance_detail": prov,
                          "reference_candidate": reference_candidate(task.source),
                          **sizes_on_meta(task, module), "instruction": instruction, **(extra or {})})
    return task


def sizes_on_meta(task: Task, module: Any) -> dict[str, int | None]:
    """What one call of the problem moves, from `get_inputs()` and `Model` run on the meta device
    (shapes only, nothing allocated): `input_bytes`, and `reference_trial_bytes`, what the reference
    writes to the verifier's cache per seeded trial (inputs, eager outputs, float64 goldens).
    KernelBench's level-1 inputs reach 17 GB per call, so this says what a task costs before it runs:
    the benchmark script orders and shards by it, and the verifier admits a reference by disk with it
    (disk_admission.py). The loading process runs the user's own checkout, as it imports it anyway;
    None where a file's inputs or model need real data."""
    import torch

    def tensors(value: Any) -> list[torch.Tensor]:
        items = value if isinstance(value, (list, tuple)) else [value]
        return [x for x in items if isinstance(x, torch.Tensor)]

    def nbytes(ts: list[torch.Tensor]) -> int:
        return int(sum(x.numel() * x.element_size() for x in ts))

    sizes: dict[str, int | None] = {"input_bytes": None, "reference_trial_bytes": None}
    case = task.cases[0]
    try:
        with torch.device("meta"):
            inputs = case.make_inputs()
    except Exception:  # noqa: BLE001 - inputs that need real data: size unknown
        return sizes
    sizes["input_bytes"] = nbytes(tensors(inputs))
    try:
        with torch.device("meta"), torch.no_grad():
            outputs = tensors(module.Model(*case.init_inputs)(*inputs))
    except Exception:  # noqa: BLE001 - an op without a meta kernel, or data-dependent shapes
        return sizes
    golden = 8 * sum(x.numel() for x in outputs if x.is_floating_point() or x.is_complex())
    sizes["reference_trial_bytes"] = sizes["input_bytes"] + nbytes(outputs) + golden
    return sizes


def load(rest: str) -> list[Task]:
    root, problems, _ = load_problems(rest, PREFIX)
    repo_root = repo_root_of(root)
    instruction = prompt_material(repo_root)
    return [problem_task(root, lv, f, benchmark=PREFIX, repo_root=repo_root, instruction=instruction)
            for lv, f in problems]


def repo_root_of(path: Path) -> Path:
    """The KernelBench checkout containing PATH (the folder holding `KernelBench/`), else PATH."""
    for folder in [path, *path.parents]:
        if (folder / "KernelBench").is_dir() and (folder / "src").is_dir():
            return folder
    return path if path.is_dir() else path.parent
