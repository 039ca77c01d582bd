"""Where reference inputs/outputs live, keyed by everything that could change them.

Key = (task source hash, case, seeds, init seed, device kind and name, torch/triton/amdkv
versions, whether baselines were timed). Inputs and expected outputs are separate files so a
candidate can be given the first without being able to open the second.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import amdkv
from amdkv.verify.worker_protocol import ReferenceCaseReport


# The layout of a cached case's report.json (worker_protocol.ReferenceCaseReport, read strictly):
# 2 since the protocol was typed (every field written; the compile baseline's failure in
# `compile_error`). Part of the key, so an entry of another layout is never read, only recomputed.
REPORT_FORMAT = 2


def refs_root(cache_dir: str | os.PathLike[str]) -> Path:
    """Reference files live under the config's cache dir (`VerifierConfig.cache_dir`)."""
    return Path(cache_dir) / "refs"


def case_key(task_hash: str, case_name: str, seeds: list[int], init_seed: int, device_desc: str,
             timed: bool, golden: bool) -> str:
    import torch
    import triton

    blob = json.dumps({"task": task_hash, "case": case_name, "seeds": seeds, "init_seed": init_seed,
                       "device": device_desc, "torch": torch.__version__, "triton": triton.__version__,
                       "amdkv": amdkv.__version__, "timed": timed, "golden": golden,
                       "format": REPORT_FORMAT}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class CaseFiles:
    """The three files of one cached reference case: inputs, expected outputs, report."""

    def __init__(self, key: str, cache_dir: str | os.PathLike[str]) -> None:
        base = refs_root(cache_dir) / key[:2] / key
        self.dir = base
        self.inputs = base / "inputs.pt"
        self.expected = base / "expected.pt"
        self.report = base / "report.json"

    def complete(self) -> bool:
        return self.inputs.is_file() and self.expected.is_file() and self.report.is_file()

    def read_report(self) -> ReferenceCaseReport:
        return ReferenceCaseReport.from_json(self.report.read_text(), where=str(self.report))

    def write_report(self, report: ReferenceCaseReport) -> None:
        tmp = self.report.with_suffix(".tmp")
        tmp.write_text(report.to_json())
        os.replace(tmp, self.report)
