"""Deterministic drawing of procedural tasks: composition, dtype, scalars and case shapes.

Task `i` of split `s` under seed `k` is drawn from `random.Random("amdkv-procedural/k/s/i/attempt")`
(string seeds hash through SHA-512, so draws are the same on every machine and Python process),
and tasks are drawn in index order, each redrawn (next attempt) while its (composition, dtype) was
already drawn by an earlier index, is degenerate by construction, or belongs to the other split.
So `n=100` is exactly the first 100 tasks of `n=5000`, and no two tasks of a split share a
composition and dtype.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Iterator

from amdkv.tasks.procedural.grammar import (ACTIVATIONS, BINARY_OPS, CORES, DTYPES, HELDOUT_CORE_ACTIVATION,
                                            HELDOUT_PROLOGUE_CORE, OPERAND_KINDS, PARAM_CORES, UNARY_OPS,
                                            Composition, Step, degenerate_reason)

SPLITS = ("train", "heldout")
MAX_ATTEMPTS = 1000
MAX_PROLOGUE = 2
MAX_ACTIVATIONS = 2
# Scalars: magnitudes away from 0 (an add of 0.01 is a no-op in disguise) and small enough that
# fp16 sums of squares over the largest rows stay finite (docs/procedural_tasks.md).
SCALAR_MAGNITUDES = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5)

# Case shapes. Correctness cases are sized for the Triton CPU interpreter (a few programs of a
# few loop iterations each); the "odd" case has sizes that are not powers of two, and row sizes
# above the kernels' 1024-wide blocks so that their loops run more than once.
# Row programs take ROWS = 4096 // BLOCK rows (at most 16), so 16-32 rows of <= 128 columns cost
# the interpreter one or two programs, and give row reductions enough outputs to be judged.
SMALL_ROWS = ((16,), (32,), (4, 8))
SMALL_COLS = (64, 128)
ODD_ROWS = ((5,), (7,), (9,), (3, 3))
ODD_COLS = (37, 77, 203, 515, 1100, 1500)
# Performance cases: sized so a kernel runs well past launch overhead on a GPU.
PERF_ELEMENTWISE = (((4096,), 4096), ((8192,), 2048), ((16, 1024), 1024), ((2048,), 8192))
PERF_ROWWISE = (((4096,), 4096), ((16384,), 1024), ((2048,), 8192), ((32768,), 512), ((8, 512), 2048))
FP16_SUM_MAX_COLS = 4096  # fp16 sums of squares over longer rows can overflow 65504
# matmul: (lead dims of x, K, N)
SMALL_MATMUL = (((16,), 32, 32), ((32,), 64, 16), ((2, 8), 32, 64))
ODD_MATMUL = (((33,), 70, 45), ((19,), 100, 24), ((3, 11), 40, 70))
PERF_MATMUL = {"fp16": (((4096,), 4096, 4096), ((8192,), 2048, 2048), ((4, 1024), 4096, 2048)),
               "fp32": (((2048,), 2048, 2048), ((1024,), 4096, 2048), ((4, 512), 1024, 1024))}


@dataclasses.dataclass(frozen=True)
class CaseShape:
    """The shape of one case: `x` is `(*lead, k)` for matmul/linear (output `(*lead, n)`), else `(*lead, n)`."""

    name: str
    tags: tuple[str, ...]
    lead: tuple[int, ...]
    n: int
    k: int | None = None

    @property
    def rows(self) -> int:
        out = 1
        for d in self.lead:
            out *= d
        return out


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything that determines one procedural task's files."""

    seed: int
    split: str
    index: int
    composition: Composition
    dtype: str
    scalars: tuple[float, ...]
    cases: tuple[CaseShape, ...]

    @property
    def task_id(self) -> str:
        return task_id(self.seed, self.split, self.index)


def task_id(seed: int, split: str, index: int) -> str:
    """`proc_s0_train_00042`: a function of the position only, so paths are known without drawing."""
    return f"proc_s{seed}_{split}_{index:05d}"


def _draw_step(rng: random.Random) -> Step:
    if rng.random() < 0.75:
        return Step(rng.choice(BINARY_OPS), rng.choice(OPERAND_KINDS))
    return Step(rng.choice(UNARY_OPS))


def _draw_activations(rng: random.Random) -> tuple[str, ...]:
    acts: list[str] = []
    for _ in range(rng.randint(0, MAX_ACTIVATIONS)):
        acts.append(rng.choice([a for a in ACTIVATIONS if not acts or a != acts[-1]]))
    return tuple(acts)


def _with_piece(rng: random.Random, pieces: list, piece: object, limit: int) -> list:
    """`pieces` with `piece` inserted at a random place (unless already there), at most `limit` long."""
    if piece in pieces:
        return pieces
    others = pieces[:limit - 1]
    at = rng.randint(0, len(others))
    return others[:at] + [piece] + others[at:]


def _draw_composition(rng: random.Random, split: str) -> Composition:
    """A random composition; for `heldout`, one built around a held-out pair."""
    core = rng.choice(CORES)
    prologue = [_draw_step(rng) for _ in range(rng.randint(0, MAX_PROLOGUE))]
    activations = list(_draw_activations(rng))
    if split == "heldout":
        pairs = [("ca", p) for p in HELDOUT_CORE_ACTIVATION] + [("pc", p) for p in HELDOUT_PROLOGUE_CORE]
        kind, (a, b) = rng.choice(pairs)
        if kind == "ca":
            core = a
            activations = _with_piece(rng, activations, b, MAX_ACTIVATIONS)
        else:
            core = b
            op, _, operand = a.partition(".")
            prologue = _with_piece(rng, prologue, Step(op, operand or None), MAX_PROLOGUE)
    return Composition(prologue=tuple(prologue), core=core,
                       core_params=core in PARAM_CORES and rng.random() < 0.5,
                       activations=tuple(activations), cast=rng.random() < 0.3)


def _draw_cases(rng: random.Random, comp: Composition, dtype: str) -> tuple[CaseShape, ...]:
    if comp.template == "matmul":
        small = rng.choice(SMALL_MATMUL)
        odd = rng.choice(ODD_MATMUL)
        perf = rng.choice(PERF_MATMUL[dtype])
        return (CaseShape("small", ("correctness",), small[0], small[2], small[1]),
                CaseShape("odd", ("correctness",), odd[0], odd[2], odd[1]),
                CaseShape("large", ("performance",), perf[0], perf[2], perf[1]))
    perf_pool = PERF_ELEMENTWISE if comp.template == "elementwise" else PERF_ROWWISE
    if comp.core == "sum" and dtype == "fp16":
        perf_pool = tuple(p for p in perf_pool if p[1] <= FP16_SUM_MAX_COLS)
    perf = rng.choice(perf_pool)
    return (CaseShape("small", ("correctness",), rng.choice(SMALL_ROWS), rng.choice(SMALL_COLS)),
            CaseShape("odd", ("correctness",), rng.choice(ODD_ROWS), rng.choice(ODD_COLS)),
            CaseShape("large", ("performance",), perf[0], perf[1]))


def draw_task(seed: int, split: str, index: int, taken: set[tuple[str, str]]) -> TaskSpec:
    """Task `index` of `split`: the first attempt that is valid for the split and not in `taken`."""
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"amdkv-procedural/{seed}/{split}/{index}/{attempt}")
        comp = _draw_composition(rng, split)
        dtype = rng.choice(DTYPES)
        scalars = tuple(rng.choice((-1.0, 1.0)) * rng.choice(SCALAR_MAGNITUDES)
                        for s in comp.prologue if s.operand == "scalar")
        if (split == "heldout") != comp.is_heldout or (comp.key, dtype) in taken:
            continue
        if degenerate_reason(comp, list(scalars)) is not None:
            continue
        return TaskSpec(seed, split, index, comp, dtype, scalars, _draw_cases(rng, comp, dtype))
    raise RuntimeError(f"no valid composition for {split} task {index} (seed {seed}) in {MAX_ATTEMPTS} attempts")


def iter_tasks(seed: int, split: str, n: int) -> Iterator[TaskSpec]:
    """The first `n` tasks of `split` under `seed`, in index order (prefix-stable)."""
    if split not in SPLITS:
        raise ValueError(f"unknown procedural split {split!r}; use one of {SPLITS}")
    taken: set[tuple[str, str]] = set()
    for index in range(n):
        spec = draw_task(seed, split, index, taken)
        taken.add((spec.composition.key, spec.dtype))
        yield spec
