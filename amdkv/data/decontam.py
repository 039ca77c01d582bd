"""Decontamination: nothing an evaluation suite shows or expects may be trained on.

The evaluation side is every task of the given suite specs (`builtin:eval` by default, plus any
external benchmark a loader reads: `kernelbench:PATH`, `tritonbench-g:PATH`, `rocmbench:PATH`,
a folder of task files...) and any `Task` objects passed in. From each eval task we take every
text a model could memorise: the task's source (the prompt) and its reference solutions: the
bundled solutions of a builtin task, `task.metadata["solutions"]` ({language: source}) and, as the
external loaders fill them, `metadata["reference_candidate"]`, `["reference_solution"]` and
`["instruction"]`.

A corpus row is contaminated, and removed, when (first match wins, counted by reason):
- `task_id`: its task has the id of an eval task of the same suite;
- `task_exact` / `task_near`: its task source (the prompt) equals, or is a near copy of, any eval
  text (estimated Jaccard of word shingles >= `task_threshold`, default 0.5: lower than the
  deduplication threshold on purpose, a partly rewritten benchmark task is still a leak);
- `text_exact` / `text_near`: its kernel (or QA text, or any turn's program) equals or is a near
  copy of any eval text (>= `text_threshold`, default 0.8). Kernels get the higher threshold
  because kernels of different tasks share boilerplate: measured on the bundled solutions, the
  closest train/eval pairs are matmul kernels of different layouts (0.77) and two elementwise
  activations (0.54); at 0.5 those would count as copies.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Sequence

import numpy as np

from amdkv.data.similarity import NeighbourIndex, Signer

DEFAULT_EVAL_SUITES = ("builtin:eval",)
DEFAULT_TASK_THRESHOLD = 0.5
DEFAULT_TEXT_THRESHOLD = 0.8
PASSED_IN = "(tasks passed in)"   # the suite name of eval tasks given as Task objects


@dataclasses.dataclass(frozen=True)
class EvalText:
    suite: str          # the spec it came from
    task_id: str
    task_suite: str     # the Task.suite of the eval task (builtin tasks: their folder, e.g. `general`)
    what: str           # "task" or "solution:<language>"
    text: str


def eval_texts(specs: Sequence[str] = DEFAULT_EVAL_SUITES, tasks: Iterable = ()) -> list[EvalText]:
    """Every text of the eval tasks named by `specs` and of `tasks` (see the module docstring)."""
    from amdkv.tasks.suites import load_suite

    out: list[EvalText] = []
    groups = [(spec, load_suite(spec)) for spec in specs] + [(PASSED_IN, list(tasks))]
    for spec, suite_tasks in groups:
        for task in suite_tasks:
            out.append(EvalText(spec, task.id, task.suite, "task", task.source))
            out += [EvalText(spec, task.id, task.suite, f"solution:{lang}", text)
                    for lang, text in _solutions(task).items()]
    return out


# Task metadata that external loaders fill with text a model could learn the answer from: the
# benchmark's own kernel or reference candidate, and the instruction its prompts show.
TEXT_METADATA_KEYS = ("reference_solution", "reference_candidate", "instruction")


def _solutions(task) -> dict[str, str]:
    from amdkv.tasks import builtin

    found: dict[str, str] = {}
    meta = task.metadata or {}
    if isinstance(meta.get("solutions"), dict):
        found.update({str(k): v for k, v in meta["solutions"].items() if isinstance(v, str)})
    for key in TEXT_METADATA_KEYS:
        if isinstance(meta.get(key), str) and meta[key].strip():
            found.setdefault(key, meta[key])
    if task.path and builtin.task_path(task.id) is not None:
        for lang in builtin.LANGUAGES:
            path = builtin.solution_path(task.id, lang)
            if path is not None:
                found.setdefault(lang, path.read_text(encoding="utf-8"))
    return found


class Decontaminator:
    """Matches corpus texts against the eval texts (exact keys and a MinHash LSH)."""

    def __init__(self, texts: Sequence[EvalText], signer: Signer, *, task_threshold: float = DEFAULT_TASK_THRESHOLD,
                 text_threshold: float = DEFAULT_TEXT_THRESHOLD) -> None:
        self.texts = list(texts)
        self._by_id = {(t.task_suite, t.task_id): t for t in self.texts if t.what == "task"}
        self._exact: dict[str, int] = {}
        self._near = {"task": NeighbourIndex(signer, task_threshold), "text": NeighbourIndex(signer, text_threshold)}
        for i, t in enumerate(self.texts):
            key, sig = signer.fingerprint(t.text)
            self._exact.setdefault(key, i)
            for index in self._near.values():
                index.add(i, sig)
        self.suites = sorted({t.suite for t in self.texts})

    def match_task(self, suite: str | None, task_id: str | None, exact: str, signature: np.ndarray) -> tuple[str, EvalText] | None:
        """(reason, eval text) when a corpus task is an eval task or a copy of eval text."""
        same = self._by_id.get((suite, task_id))
        if same is not None:
            return "task_id", same
        return self._match("task", exact, signature)

    def match_text(self, exact: str, signature: np.ndarray) -> tuple[str, EvalText] | None:
        return self._match("text", exact, signature)

    def _match(self, prefix: str, exact: str, signature: np.ndarray) -> tuple[str, EvalText] | None:
        if exact in self._exact:
            return f"{prefix}_exact", self.texts[self._exact[exact]]
        near = self._near[prefix].query(signature)
        return (f"{prefix}_near", self.texts[near[0]]) if near else None
