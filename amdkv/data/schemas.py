"""The published datasets, their configs, and the explicit `datasets.Features` of every config.

| dataset (repo)   | configs (default first)                      |
|------------------|----------------------------------------------|
| `amdkv/hip`      | `torch2hip`, `hip2hip`, `trajectories`       |
| `amdkv/triton`   | `torch2triton`, `triton2triton`, `trajectories` |
| `amdkv/rocm-qa`  | `rocm_qa`                                    |

Config kinds: `translation` (a PyTorch task -> one kernel), `optimisation` (a slower correct kernel
-> a faster correct kernel of the same task, on the same platform), `trajectories` (multi-turn
write/verify/fix attempts, the `Trajectory` format), `rocm_qa`. Each kind has a schema version,
stored in every row's `schema_version` column; the trajectories kind's version is the
`Trajectory` format's own (`TRAJECTORY_SCHEMA_VERSION`), because its rows are that format plus
the evidence columns below.

Decisions (docs/data.md): open vocabularies (status, reason, platform, op family, arch, library,
licence) are plain strings, not `ClassLabel`s, so a new value never needs a schema change; free
-form dictionaries (verdicts, origins, grounding details) are exact JSON text in string columns,
not `datasets.Json` (measured: Json rounds floats to 10 decimals and reads some back an ulp off, so
a verdict would not survive the round trip). Every row carries `messages` (system/user/assistant,
`amdkv.prompts.trajectory.message_features()`), the verdict's `platform`, `execution_verified`
(True only for an `ok` verdict from a GPU platform) and `interpreter_verified` (an `ok` under the
CPU interpreter), `licence` and `provenance`.

This module imports `datasets` only inside `features()`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from amdkv.errors import BadInputError
from amdkv.prompts.trajectory import TRAJECTORY_SCHEMA_VERSION

TRANSLATION = "translation"
OPTIMISATION = "optimisation"
TRAJECTORIES = "trajectories"
ROCM_QA = "rocm_qa"

SCHEMA_VERSIONS: dict[str, int] = {
    TRANSLATION: 1,
    OPTIMISATION: 1,
    TRAJECTORIES: TRAJECTORY_SCHEMA_VERSION,
    ROCM_QA: 1,
}


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """One published dataset: its builder name (`amdkv build NAME`), the language its kernels
    are in, its configs (the first is the default) and the kind of each config."""

    name: str
    language: str | None
    configs: tuple[str, ...]
    kinds: tuple[str, ...]
    pretty_name: str

    @property
    def default_config(self) -> str:
        return self.configs[0]

    def kind(self, config: str) -> str:
        try:
            return self.kinds[self.configs.index(config)]
        except ValueError:
            raise BadInputError(f"dataset {self.name!r} has no config {config!r}",
                                hint=f"its configs are {', '.join(self.configs)}") from None


DATASETS: dict[str, DatasetSpec] = {
    "hip": DatasetSpec("hip", "hip", ("torch2hip", "hip2hip", "trajectories"),
                       (TRANSLATION, OPTIMISATION, TRAJECTORIES), "amdkv HIP kernels"),
    "triton": DatasetSpec("triton", "triton", ("torch2triton", "triton2triton", "trajectories"),
                          (TRANSLATION, OPTIMISATION, TRAJECTORIES), "amdkv Triton kernels"),
    "rocm-qa": DatasetSpec("rocm-qa", None, ("rocm_qa",), (ROCM_QA,), "amdkv ROCm-libraries QA"),
}


def dataset_spec(name: str) -> DatasetSpec:
    if name not in DATASETS:
        raise BadInputError(f"unknown dataset {name!r}", hint=f"datasets: {', '.join(DATASETS)}")
    return DATASETS[name]


def features(kind: str) -> Any:
    """The `datasets.Features` of a config kind (see the module docstring)."""
    from datasets import Features, List, Value

    from amdkv.prompts.trajectory import features as trajectory_features, message_features

    text, i32, f64, flag = Value("string"), Value("int32"), Value("float64"), Value("bool")
    task = {"task_id": text, "task_suite": text, "suite_version": text, "task_source": text, "level": i32,
            "op_family": text, "dtypes": List(text)}
    evidence = {"platform": text, "device": text, "execution_verified": flag, "interpreter_verified": flag}
    made = {"model": text, "origin": text, "licence": text, "provenance": text, "cluster": text}
    if kind == TRANSLATION:
        cols = {"id": text, "schema_version": i32, **task, "language": text, "kernel": text, "kernel_sha256": text,
                "messages": message_features(), "prompt_version": text, "status": text, "reason": text,
                "correct": flag, "compiled": flag, "speedup": f64, "speedup_compile": f64, "sol": f64,
                "verdict": text, **evidence, "turn": i32, **made}
    elif kind == OPTIMISATION:
        cols = {"id": text, "schema_version": i32, **task, "language": text, "kernel_before": text,
                "kernel_after": text, "before_id": text, "after_id": text, "speedup_before": f64,
                "speedup_after": f64, "gain": f64, "pair_source": text, "messages": message_features(),
                "prompt_version": text, "verdict_before": text, "verdict_after": text, **evidence, **made}
    elif kind == TRAJECTORIES:
        # the Trajectory row format (task_id, model, turns, schema_version, ...) plus the evidence
        cols = {"id": text, **trajectory_features(), **{k: v for k, v in task.items() if k != "task_id"},
                "messages": message_features(), **evidence, **{k: v for k, v in made.items() if k != "model"}}
    elif kind == ROCM_QA:
        cols = {"id": text, "schema_version": i32, "question": text, "answer": text, "library": text, "file": text,
                "line_start": i32, "line_end": i32, "commit": text, "grounded": flag, "grounding": text,
                "messages": message_features(), "prompt_version": text, **evidence, **made}
    else:
        raise BadInputError(f"unknown config kind {kind!r}", hint=f"kinds: {', '.join(SCHEMA_VERSIONS)}")
    return Features(cols)


# One line per column, for the dataset card's "Fields" section (tested: every column has one).
COLUMN_DOCS: dict[str, str] = {
    "id": "row id: the record's content hash (pairs: hash of both ids; trajectory turns: of record and turn)",
    "schema_version": "version of this config's row format",
    "task_id": "task id", "task_suite": "suite the task came from", "suite_version": "version of that suite",
    "task_source": "the PyTorch reference program (KernelBench format)", "level": "1 single op, 2 fused ops, 3 block",
    "op_family": "operation family", "dtypes": "dtypes of the main inputs", "language": "kernel language",
    "kernel": "the verified program (defines ModelNew)", "kernel_sha256": "sha256 of `kernel` (the verdict echoes it)",
    "kernel_before": "the slower correct program", "kernel_after": "the faster correct program",
    "before_id": "row/record id of the slower program", "after_id": "row/record id of the faster program",
    "speedup_before": "its speedup vs eager PyTorch", "speedup_after": "its speedup vs eager PyTorch",
    "gain": "speedup_after / speedup_before", "pair_source": "`parent` (made from it) or `task` (same task, fastest)",
    "messages": "ready-to-train chat: system, user (request), assistant (answer); `reasoning_content` when recorded",
    "prompt_version": "version of the prompt templates the messages come from",
    "status": "verdict status (ok, compile_error, runtime_error, timeout, mismatch, hack_detected, unverifiable)",
    "reason": "finer cause under the status", "correct": "judged correct", "compiled": "built/loaded",
    "speedup": "geometric mean of reference time / kernel time over performance cases (GPU platforms only)",
    "speedup_compile": "the same against torch.compile", "sol": "fraction of the roofline (speed of light)",
    "verdict": "the whole verdict as exact JSON text (`Verdict.from_dict(json.loads(...))`)",
    "verdict_before": "verdict of kernel_before (JSON text)", "verdict_after": "verdict of kernel_after (JSON text)",
    "platform": "where it was verified: rocm (AMD GPU), cuda (NVIDIA GPU), cpu (Triton interpreter)",
    "device": "the device that ran it", "execution_verified": "true only for an ok verdict from a GPU platform",
    "interpreter_verified": "an ok under the CPU interpreter (correctness only, no timings)",
    "turn": "turn of the trajectory the program came from", "model": "the model that wrote it",
    "origin": "how it was made (model, run, sample, turn, parent...) as JSON text",
    "licence": "licence of the row", "provenance": "where the task came from",
    "cluster": "near-duplicate cluster (no cluster spans two splits)",
    "arch": "AMD target the prompt named", "prompt": "the first request (system, user)",
    "turns": "every turn: stage, reply, reasoning, program, extraction, verdict (JSON), feedback, tokens, reward",
    "gamma": "discount over turns", "trajectory_id": "id of the attempt", "metadata": "free-form metadata (JSON text)",
    "final_status": "status of the last turn", "return": "discounted return G_0 (None: unscorable)",
    "question": "the question", "answer": "the grounded answer", "library": "ROCm library",
    "file": "file the answer is grounded in", "line_start": "first line (1-based)", "line_end": "last line (inclusive)",
    "commit": "commit of the library's source tree", "grounded": "the cited lines exist and support the answer",
    "grounding": "the grounding check's details (JSON text)",
}
