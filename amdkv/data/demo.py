"""The data half of `make demo`: the bundled solutions as records, and the read-back.

`amdkv demo --records DIR` writes each verified bundled solution as a `sample` record
(`SolutionRecords`); `amdkv build triton --records DIR --out build/amdkv-triton` builds the Hub
layout; `python -m amdkv.data.demo build/amdkv-triton` reads it back with `load_dataset` exactly as
a user would and prints what came back.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from amdkv.data.records import Record
from amdkv.data.store import RecordStore

ORIGIN = "bundled reference solution"


class SolutionRecords:
    """A record store that takes (task, solution path, verdict) from `amdkv demo`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.store = RecordStore(path)

    def add(self, task: Any, solution: str | os.PathLike[str], verdict: Any) -> bool:
        from amdkv.verify.candidate import Candidate

        candidate = Candidate.from_file(solution, language=verdict.language or "auto")
        origin = {"model": None, "source": ORIGIN, "file": f"solutions/{Path(solution).parent.name}/{Path(solution).name}"}
        return self.store.append(Record.from_verification(task, candidate, verdict, origin=origin,
                                                          provenance=f"{ORIGIN} (amdkv); task: {task.provenance}"))

    def close(self) -> None:
        self.store.close()


def readback(folder: str | os.PathLike[str]) -> None:
    """Print what `load_dataset(folder)` and `load_dataset(folder, config)` return."""
    import json

    from datasets import load_dataset
    from datasets.utils.logging import disable_progress_bar

    from amdkv.data.hub_layout import read_layout

    disable_progress_bar()
    folder = str(folder)
    layout = read_layout(folder)
    default = next(c for c, e in layout.items() if e["default"])
    print(f'load_dataset("{folder}")  # default config: {default}')
    print(load_dataset(folder))
    for config in layout:
        if config != default:
            data = load_dataset(folder, config)
            print(f'load_dataset("{folder}", "{config}"): ' + ", ".join(f"{s} {len(d)}" for s, d in data.items()))
    train = load_dataset(folder, default, split="train")
    row = train[0]
    verified = sum(train["execution_verified"])
    print(f"\nrow 0 of {default}/train: task {row['task_id']}, platform {row['platform']}, status {row['status']}, "
          f"execution_verified {row['execution_verified']}, interpreter_verified {row['interpreter_verified']}")
    for message in row["messages"]:
        text = message["content"].replace("\n", " ")
        print(f"  {message['role']:>9}: {text[:110]}{'...' if len(text) > 110 else ''}")
    verdict = json.loads(row["verdict"])
    print(f"  verdict: {verdict['status']} on {verdict['platform']} ({verdict['device']}), "
          f"{len(verdict['cases'])} cases, candidate sha256 {str(verdict.get('candidate_sha256'))[:12]}")
    print(f"\n{verified} of {len(train)} train rows execution-verified on a GPU; the card says "
          f"execution_verified: {_card_flag(folder)}")


def _card_flag(folder: str) -> Any:
    from huggingface_hub import DatasetCard

    return (DatasetCard.load(Path(folder) / "README.md").data.to_dict().get("amdkv") or {}).get("execution_verified")


if __name__ == "__main__":
    readback(sys.argv[1] if len(sys.argv) > 1 else "build/amdkv-triton")
