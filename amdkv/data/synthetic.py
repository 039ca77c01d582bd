"""Synthetic records of realistic size and shape, for the builder's tests and scale benchmark.

Not a corpus: the programs are random compositions that look like generated Triton/HIP kernels
(2-8 KB each, several kernels, a `ModelNew`), with full `Verdict`s built by the real `Verdict`
type (cases with errors and timings, AMD resources per arch, environment, harness timings, logs
for failures). Deterministic for a seed. What a corpus build must cope with is planted on
purpose and reported in `SyntheticCorpus.planted`: exact duplicates (the same program
reformatted), near duplicates (a renamed variable, a changed block size), optimisation chains
(`origin.parent`), trajectories, records of the other language, GPU and interpreter verdicts, and
copies of `builtin:eval` tasks and solutions (which decontamination must remove).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any, Iterator

from amdkv.data.records import Record
from amdkv.tasks.types import Task

STATUS_WEIGHTS = (("ok", 55), ("mismatch", 15), ("compile_error", 12), ("runtime_error", 8), ("timeout", 4),
                  ("hack_detected", 3), ("unverifiable", 2), ("infra_error", 1))
OPS = ("relu", "sigmoid", "tanh", "exp", "abs", "neg", "sqrt", "log1p", "sin", "cos", "square", "gelu", "silu")
REDUCTIONS = ("sum", "mean", "amax", "amin", "softmax", "log_softmax", "cumsum", "norm")
FAMILIES = ("elementwise", "activation", "reduction", "softmax", "norm", "matmul", "scan", "fused")
_NAMES = ("acc", "val", "tile", "row", "col", "blk", "tmp", "res", "part", "lane", "off", "idx", "vec", "buf")


@dataclasses.dataclass
class SyntheticCorpus:
    """What was generated and what was planted (counts per kind)."""

    records: list[Record]
    tasks: list[Task]
    planted: dict[str, int]


def _words(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(_NAMES) + str(rng.randrange(100)) for _ in range(n)]


def make_task(rng: random.Random, index: int) -> Task:
    """A PyTorch reference program: a random composition of ops with random shapes."""
    ops = [rng.choice(OPS) for _ in range(rng.randint(1, 4))]
    red = rng.choice(REDUCTIONS)
    shape = (rng.choice((64, 128, 256, 512, 1000, 2048)), rng.choice((77, 128, 384, 1024, 4096)))
    body = "\n".join(f"        x = torch.{op}(x)" if op not in ("gelu", "silu", "relu") else
                     f"        x = torch.nn.functional.{op}(x)" for op in ops)
    red_line = f"        return torch.{red}(x, dim=-1)"
    task_id = f"syn_{index:05d}_{'_'.join(ops)}_{red}"
    doc = f"{' then '.join(ops)} then {red} over the last dimension ({rng.choice(_NAMES)} variant {index})"
    source = f'''"""{doc}."""

import torch
import torch.nn as nn

METADATA = {{"level": {1 if len(ops) == 1 else 2}, "op_family": "{rng.choice(FAMILIES)}", "dtypes": ["fp32"],
            "licence": "Apache-2.0", "provenance": "synthetic (amdkv benchmark)"}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale_{index} = {rng.random():.4f}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale_{index}
{body}
{red_line}


def get_inputs():
    return [torch.randn({shape[0]}, {shape[1]})]


def get_init_inputs():
    return []
'''
    return Task(id=task_id, path="", source=source, suite="synthetic", level=1 if len(ops) == 1 else 2,
                op_family=rng.choice(FAMILIES), dtypes=("fp32",), licence="Apache-2.0",
                provenance="synthetic (amdkv benchmark)", metadata={"suite_version": "synthetic-1"})


def _kernel_block(rng: random.Random, name: str) -> str:
    a, b, c, d = _words(rng, 4)
    ops = [rng.choice(("tl.exp", "tl.abs", "tl.sqrt", "tl.sigmoid", "tl.maximum", "tl.where")) for _ in range(3)]
    block = rng.choice((64, 128, 256, 512, 1024))
    lines = [
        "@triton.jit",
        f"def {name}(x_ptr, y_ptr, n_rows, n_cols, stride_{a}, BLOCK: tl.constexpr):",
        f"    {a} = tl.program_id(0)",
        f"    {b} = tl.arange(0, BLOCK)",
        f"    mask_{c} = {b} < n_cols",
        f"    {c} = tl.load(x_ptr + {a} * stride_{a} + {b}, mask=mask_{c}, other=0.0)",
    ]
    for k in range(rng.randint(6, 18)):
        op = rng.choice(ops)
        arg = f"{c}, 0.0" if op in ("tl.maximum",) else (f"{c} > 0, {c}, -{c}" if op == "tl.where" else c)
        lines.append(f"    {d}_{k} = {op}({arg}) * {rng.random():.5f} + {rng.randint(1, 9)}.0")
        lines.append(f"    {c} = {c} + {d}_{k} * {rng.random():.3f}  # step {k}: {rng.choice(_NAMES)} update")
    lines += [f"    {d} = tl.sum({c}, axis=0) / n_cols",
              f"    tl.store(y_ptr + {a} * stride_{a} + {b}, {c} - {d}, mask=mask_{c})",
              f"    # tuned for BLOCK={block} on gfx942", ""]
    return "\n".join(lines)


def make_program(rng: random.Random, task: Task, language: str) -> str:
    """A program of 2-8 KB that looks like a generated kernel for `task`."""
    target = rng.randint(2048, 8192)
    parts = [f'"""Kernel for {task.id} ({language}), written for AMD Instinct GPUs."""', "",
             "import torch", "import torch.nn as nn", "import triton", "import triton.language as tl", ""]
    names = []
    while sum(len(p) + 1 for p in parts) < target - 900:
        name = f"_{rng.choice(_NAMES)}_kernel_{len(names)}"
        names.append(name)
        parts.append(_kernel_block(rng, name))
    launches = "\n".join(f"        {n}[(x.shape[0],)](x, y, x.shape[0], x.shape[1], x.stride(0), BLOCK=1024)"
                         for n in names)
    parts.append(f'''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
{launches}
        return y
''')
    if language == "hip":
        parts.insert(2, 'cpp_sources = """\n#include <hip/hip_runtime.h>\n__global__ void k(float* x) {}\n"""')
    return "\n".join(parts)


def reformat(source: str) -> str:
    """The same program, reformatted (an exact duplicate after normalisation)."""
    return "\n\n".join(line.rstrip() + "   " for line in source.split("\n")) + "\n# reformatted\n"


def near_copy(rng: random.Random, source: str) -> str:
    """A near duplicate: one name renamed, one constant changed."""
    name = next((w for w in _NAMES if w in source), "acc")
    return source.replace(name, name + "_v", 2).replace("BLOCK=1024", f"BLOCK={rng.choice((256, 512, 2048))}", 1)


def make_verdict(rng: random.Random, task: Task, source: str, language: str, status: str, platform: str,
                 speedup: float | None = None) -> dict[str, Any]:
    """A full verdict (the real `Verdict` type) for `source` on `platform`."""
    from amdkv.verify.candidate import source_sha256
    from amdkv.verify.verdict import ArchResources, CaseResult, Verdict

    gpu = platform in ("rocm", "cuda")
    cases = []
    for k, (name, tags) in enumerate((("small", ["correctness"]), ("odd", ["correctness"]),
                                      ("large", ["performance"]))):
        if "performance" in tags and not gpu:
            continue
        err = rng.random() * 1e-6
        case = CaseResult(name=name, tags=tags, status="ok" if status == "ok" else status, trials=3,
                          max_abs_err=err, max_rel_err=err * 3.1, allowed_abs_err=2.2e-6 + rng.random() * 1e-6,
                          ref_err=err / 2, min_bytes=rng.randrange(1 << 16, 1 << 26))
        if gpu and "performance" in tags and status == "ok":
            case.ref_ms = rng.uniform(0.05, 5.0)
            case.cand_ms = case.ref_ms / (speedup or 1.0)
            case.speedup, case.speedup_compile = speedup, (speedup or 1.0) * rng.uniform(0.6, 1.1)
            case.timing_method, case.sol = "graph", rng.uniform(0.05, 0.9)
        cases.append(case)
    resources = [ArchResources(arch=arch, kernel=f"_kernel_{i}", compiled=status != "compile_error",
                               vgpr=rng.randrange(8, 256), agpr=0, sgpr=rng.randrange(16, 104), vgpr_spill=0,
                               sgpr_spill=0, scratch_bytes=0, lds_bytes=rng.choice((0, 32, 4096, 16384)),
                               lds_limit=65536, occupancy=rng.randint(1, 8),
                               config={"num_warps": rng.choice((4, 8)), "constexprs": {"BLOCK": 1024}})
                 for i, arch in enumerate(("gfx942", "gfx90a")[:rng.randint(1, 2)])]
    diagnostics = "" if status == "ok" else (
        f"[odd] trial 0 (seed 1234): {status}: " + " ".join(_words(rng, rng.randint(40, 160))))
    verdict = Verdict(
        status=status, reason=None if status == "ok" else f"{status}_reason", task_id=task.id, language=language,
        platform=platform, device={"rocm": "AMD Instinct MI300X (gfx942)", "cuda": "NVIDIA H200",
                                   "cpu": "cpu-interpreter"}[platform],
        speedup=speedup if gpu and status == "ok" else None,
        speedup_compile=(speedup or 1.0) * 0.9 if gpu and status == "ok" else None,
        sol=rng.uniform(0.05, 0.9) if gpu and status == "ok" else None,
        interpreter_verified=status == "ok" and not gpu, cases=cases, resources=resources, diagnostics=diagnostics,
        env={"amdkv": "0.1.0", "platform": platform, "torch": "2.13.0", "triton": "3.6.0", "python": "3.11.7",
             "suite_version": "synthetic-1", "task_source_hash": task.source_hash, "trials": 3, "base_seed": 1234,
             "rocm": "6.4.1" if platform == "rocm" else None, "gpu": platform != "cpu"},
        timings={k: round(rng.uniform(0.001, 3.0), 3) for k in ("static_s", "reference_s", "candidate_s", "judge_s",
                                                                 "amd_compile_s", "worker_job_s", "total_s")},
        candidate_sha256=source_sha256(source))
    return verdict.enforce_invariants().to_dict()


def make_corpus(n_records: int, *, n_tasks: int | None = None, language: str = "triton", seed: int = 0,
                platform: str = "rocm", trajectory_share: float = 0.1, other_language_share: float = 0.01,
                eval_plants: int = 0) -> SyntheticCorpus:
    """`n_records` records over `n_tasks` tasks (see the module docstring), in memory."""
    planted: dict[str, int] = {}
    tasks: list[Task] = []
    records = list(iter_corpus(n_records, n_tasks=n_tasks, language=language, seed=seed, platform=platform,
                               trajectory_share=trajectory_share, other_language_share=other_language_share,
                               eval_plants=eval_plants, planted=planted, tasks_out=tasks))
    return SyntheticCorpus(records, tasks, planted)


def iter_corpus(n_records: int, *, n_tasks: int | None = None, language: str = "triton", seed: int = 0,
                platform: str = "rocm", trajectory_share: float = 0.1, other_language_share: float = 0.01,
                eval_plants: int = 0, planted: dict[str, int] | None = None,
                tasks_out: list[Task] | None = None) -> Iterator[Record]:
    """The records of `make_corpus`, one at a time (memory stays small for 100,000 records: only
    the last few programs of each task are remembered for planting copies). `n_records` counts
    the generated records; `eval_plants` more follow."""
    from amdkv.prompts.trajectory import Trajectory, Turn
    from amdkv.verify.candidate import Candidate

    rng = random.Random(seed)
    n_tasks = n_tasks or max(1, n_records // 40)
    tasks = [make_task(rng, i) for i in range(n_tasks)]
    if tasks_out is not None:
        tasks_out.extend(tasks)
    planted = planted if planted is not None else {}
    planted.update({"exact_duplicates": 0, "near_duplicates": 0, "parent_links": 0, "trajectories": 0,
                    "other_language": 0, "eval_task_copies": 0, "eval_solution_copies": 0})
    history: dict[str, list[tuple[str, str, float | None, str]]] = {}   # task -> (record id, source, speedup, status)
    statuses = [s for s, w in STATUS_WEIGHTS for _ in range(w)]
    for sample in range(1, n_records + 1):
        task = rng.choice(tasks)
        lang = language
        if rng.random() < other_language_share:
            lang = "hip" if language == "triton" else "triton"
            planted["other_language"] += 1
        past = history.setdefault(task.id, [])
        roll = rng.random()
        origin: dict[str, Any] = {"model": rng.choice(("Qwen/Qwen3-8B", "Qwen/Qwen3-32B")), "run": f"syn{seed}",
                                  "sample": sample}
        if past and roll < 0.06:
            source = reformat(rng.choice(past)[1])
            planted["exact_duplicates"] += 1
        elif past and roll < 0.10:
            source = near_copy(rng, rng.choice(past)[1])
            planted["near_duplicates"] += 1
        else:
            source = make_program(rng, task, lang)
        status = rng.choice(statuses)
        speedup = round(rng.lognormvariate(0.1, 0.6), 4) if status == "ok" and platform != "cpu" else None
        ok_past = [p for p in past if p[3] == "ok" and p[2]]
        if status == "ok" and speedup and ok_past and rng.random() < 0.3:
            parent = rng.choice(ok_past)
            origin["parent"] = parent[0]
            speedup = round(parent[2] * rng.uniform(1.0, 2.0), 4)
            planted["parent_links"] += 1
        if rng.random() < trajectory_share and lang == language:
            record = _trajectory_record(rng, task, lang, platform, origin, Trajectory, Turn)
            planted["trajectories"] += 1
        else:
            verdict = make_verdict(rng, task, source, lang, status, platform, speedup)
            record = Record.from_verification(task, Candidate(source, language=lang), verdict, origin=origin)
            past.append((record.id, source, speedup, status))
            del past[:-HISTORY]
        yield record
    yield from _plant_eval_copies(rng, eval_plants, language, platform, planted)


HISTORY = 6  # programs remembered per task for planting copies and parent links


def _trajectory_record(rng: random.Random, task: Task, language: str, platform: str, origin: dict[str, Any],
                       Trajectory: Any, Turn: Any) -> Record:
    """A 2-4 turn attempt: failures fixed, then (sometimes) an optimisation of the correct program."""
    from amdkv.prompts.messages import PromptConfig, system_message

    config = PromptConfig(language=language, shots=0)
    prompt = [system_message(config), {"role": "user", "content": f"Write ModelNew for this task.\n\n{task.source}"}]
    traj = Trajectory(task_id=task.id, language=language, arch=config.arch, prompt_version=config.version,
                      prompt=prompt, model=origin["model"], metadata={"run": origin["run"], "sample": origin["sample"]},
                      trajectory_id=f"syn-{origin['run']}-{origin['sample']}")
    n = rng.randint(2, 4)
    speed = rng.lognormvariate(0.0, 0.4)
    stages = ["write"]
    for k in range(n):
        status = "ok" if k == n - 1 or (k > 0 and rng.random() < 0.5) else rng.choice(("compile_error", "mismatch"))
        if status == "ok" and platform != "cpu":
            speed *= rng.uniform(1.0, 1.8)
        code = make_program(rng, task, language)
        verdict = make_verdict(rng, task, code, language, status, platform,
                               round(speed, 4) if status == "ok" and platform != "cpu" else None)
        traj.turns.append(Turn(stage=stages[-1], reply=f"Here is the program.\n```python\n{code}\n```", code=code,
                               verdict=verdict, feedback=f"status {status}" if k < n - 1 else None,
                               reasoning=" ".join(_words(rng, 30)), finish_reason="stop",
                               prompt_tokens=rng.randrange(2000, 9000), completion_tokens=rng.randrange(500, 3000)))
        stages.append("optimise" if status == "ok" else "fix_mismatch" if status == "mismatch" else "fix_compile")
    return Record.from_trajectory(traj, task, origin=origin)


def _plant_eval_copies(rng: random.Random, n: int, language: str, platform: str,
                       planted: dict[str, int]) -> Iterator[Record]:
    """Records whose task is a `builtin:eval` task, and records whose kernel copies an eval solution."""
    if n <= 0:
        return
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.candidate import Candidate

    evals = [t for t in load_suite("builtin:eval") if solution_path(t.id, language)]
    for k in range(n):
        task = evals[k % len(evals)]
        source = solution_path(task.id, language).read_text()
        if k % 2 == 0:  # the eval task itself, with its own solution
            record_task = task
            planted["eval_task_copies"] += 1
        else:           # a different (train-like) task whose kernel is the eval solution
            record_task = make_task(rng, 90_000 + k)
            planted["eval_solution_copies"] += 1
        verdict = make_verdict(rng, record_task, source, language, "ok", platform, 1.5 if platform != "cpu" else None)
        yield Record.from_verification(record_task, Candidate(source, language=language), verdict,
                                       origin={"model": "plant", "sample": k})


def make_qa_records(n: int, *, seed: int = 0, duplicates: int = 0) -> list[Record]:
    """`n` ROCm-libraries QA records (about 1 in 8 not grounded), plus `duplicates` exact copies
    (same question and answer, another origin)."""
    rng = random.Random(seed)
    libraries = ("rocBLAS", "MIOpen", "composable_kernel", "rocSOLVER", "hipCUB")
    records = []
    for i in range(n):
        library = rng.choice(libraries)
        file = f"library/src/{rng.choice(_NAMES)}_{i % 37}.cpp"
        start = rng.randint(1, 2000)
        question = (f"In {library}, what does `{rng.choice(_NAMES)}_{i}` in {file} do with "
                    f"{' '.join(_words(rng, rng.randint(5, 15)))}?")
        answer = (f"Lines {start}-{start + 12} of {file}: " + " ".join(_words(rng, rng.randint(40, 120))))
        grounded = rng.random() > 0.125
        records.append(Record.from_qa(question=question, answer=answer, library=library, file=file,
                                      line_start=start, line_end=start + 12, commit=f"{rng.getrandbits(160):040x}",
                                      grounding={"grounded": grounded, "score": round(rng.random(), 6)},
                                      origin={"model": "Qwen/Qwen3-32B", "sample": i}, licence="MIT",
                                      provenance=f"{library} sources"))
    for k in range(duplicates):
        base = records[k]
        records.append(Record.from_qa(**{**base.qa, "grounding": base.qa["grounding"]}, origin={"copy": k},
                                      licence=base.licence, provenance=base.provenance))
    return records


__all__ = ["SyntheticCorpus", "iter_corpus", "make_corpus", "make_qa_records", "make_task", "make_program", "make_verdict",
           "near_copy", "reformat"]
