"""`BuildPolicy`: every choice a corpus build makes, in one value that the card and the build
report print, so a published dataset states exactly how it was made.

Selection (`select`): `correct` (verdict `ok`, the default), `faster` (`ok` with a measured
speedup >= `min_speedup`: GPU platforms only, the interpreter measures no speed) or `all` (every
judged sample, failures included, e.g. for reward models; `infra_error` never, since the harness
failed, not the candidate). `platforms`: which verdict platforms to keep; None keeps every
platform found, except that verdicts of two GPU vendors (cuda and rocm) are never merged unless
listed explicitly (NVIDIA timings say nothing about an AMD GPU). Optimisation pairs (`pairs`):
`parent` (a record names its slower parent in `origin.parent`, or an `optimise` turn of a
trajectory improves the last correct turn), `task` (any correct kernel of a task paired with the
fastest correct kernel of that task on the same platform), `both` or `none`; a pair needs
speedup_after / speedup_before >= `min_gain` and two different programs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from amdkv.data.decontam import DEFAULT_EVAL_SUITES, DEFAULT_TASK_THRESHOLD, DEFAULT_TEXT_THRESHOLD
from amdkv.errors import BadInputError

SELECTIONS = ("correct", "faster", "all")
PAIR_SOURCES = ("parent", "task", "both", "none")
TRAJECTORY_SELECTIONS = ("all", "correct")
DEFAULT_SPLITS = (("train", 0.95), ("test", 0.05))
NEAR_DUPLICATE_THRESHOLD = 0.85      # kernels of one task at or above this are one sample
TASK_CLUSTER_THRESHOLD = 0.6          # tasks at or above this share a split (amdkv.tasks.split's value)


@dataclasses.dataclass(frozen=True)
class BuildPolicy:
    select: str = "correct"
    min_speedup: float = 1.0
    platforms: tuple[str, ...] | None = None
    trajectories: str = "all"
    expand_trajectories: bool = True      # correct turns of trajectories also become translation rows
    pairs: str = "both"
    min_gain: float = 1.1
    max_pairs_per_task: int = 8
    near_threshold: float = NEAR_DUPLICATE_THRESHOLD
    task_cluster_threshold: float = TASK_CLUSTER_THRESHOLD
    decontaminate: tuple[str, ...] = DEFAULT_EVAL_SUITES
    decontam_task_threshold: float = DEFAULT_TASK_THRESHOLD
    decontam_text_threshold: float = DEFAULT_TEXT_THRESHOLD
    splits: tuple[tuple[str, float], ...] = DEFAULT_SPLITS
    seed: int = 0
    qa_grounded_only: bool = True
    configs: tuple[str, ...] | None = None   # None: every config of the dataset
    max_shard_size: int | str = "500MB"      # push_to_hub's default

    def __post_init__(self) -> None:
        _choice("select", self.select, SELECTIONS)
        _choice("pairs", self.pairs, PAIR_SOURCES)
        _choice("trajectories", self.trajectories, TRAJECTORY_SELECTIONS)
        for name in ("near_threshold", "task_cluster_threshold", "decontam_task_threshold", "decontam_text_threshold"):
            if not 0.0 < getattr(self, name) <= 1.0:
                raise BadInputError(f"{name}={getattr(self, name)} is outside (0, 1]", hint="a Jaccard similarity")
        names = [n for n, _ in self.splits]
        if len(set(names)) != len(names) or any(f <= 0 for _, f in self.splits) \
                or abs(sum(f for _, f in self.splits) - 1.0) > 1e-6:
            raise BadInputError(f"splits {dict(self.splits)} must have distinct names and positive shares summing to 1",
                                hint="e.g. --splits train=0.95,test=0.05")
        if self.min_gain < 1.0 or self.min_speedup <= 0:
            raise BadInputError(f"min_gain={self.min_gain}, min_speedup={self.min_speedup}",
                                hint="min_gain >= 1 (a pair must get faster), min_speedup > 0")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["splits"] = dict(self.splits)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BuildPolicy":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BadInputError(f"unknown build policy setting(s) {unknown}", hint=f"settings: {', '.join(sorted(known))}")
        data = dict(data)
        if isinstance(data.get("splits"), dict):
            data["splits"] = tuple(data["splits"].items())
        for name in ("platforms", "decontaminate", "configs"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        if data.get("splits") is not None:
            data["splits"] = tuple((str(n), float(f)) for n, f in data["splits"])
        return cls(**data)


def parse_splits(text: str) -> tuple[tuple[str, float], ...]:
    """`train=0.95,test=0.05` -> (("train", 0.95), ("test", 0.05))."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, share = part.partition("=")
        try:
            out.append((name.strip(), float(share)))
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise BadInputError(f"cannot read split {part!r}", hint="write NAME=SHARE pairs: train=0.95,test=0.05")
    return tuple(out)


def _choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise BadInputError(f"{name}={value!r}", hint=f"choose one of {', '.join(allowed)}")
