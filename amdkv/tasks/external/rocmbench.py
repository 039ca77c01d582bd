"""`rocmbench:PATH`: GEAK-eval's ROCm set (ROCmBench) as amdkv tasks (docs/benchmarks.md).

PATH is a checkout of AMD-AGI/GEAK-eval (files in `geak_eval/data/ROCm/data/ROCm_v1/`, 31 pytest
files) or that folder itself. Each file: kernel code, a line of 146 '#', then pytest tests,
parametrised, that record the kernel's outputs in a module dict `result_gold` (plus performance
tests that amdkv does not run). A candidate replaces the part above the line.

The files carry "Copyright AMD, all rights reserved" and the repository has no licence file, so amdkv
never republishes them: a metric loaded from the Hub needs `tasks=` pointing at your checkout.

ROCmBench's instructions are not part of GEAK-eval; GEAK's agent reads them from a JSON list of
`{"instruction", "label", "file"}`. Pass it as `?instructions=FILE` to carry them into
`metadata["instruction"]`. Options: `?instructions=FILE`, `?only=a.py,b.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

from amdkv.errors import BadInputError
from amdkv.tasks.external import common
from amdkv.tasks.external.kernel_file import build_task
from amdkv.tasks.types import Task

PREFIX = "rocmbench"
FOLDERS = ("geak_eval/data/ROCm/data/ROCm_v1", "data/ROCm_v1")
# GEAK-eval's ROCm rule: every recorded tensor torch.testing.assert_close(atol=1e-2, rtol=1e-2)
# (dtype checked, NaN never equal), same keys.
BENCHMARK_RULE = {"name": "GEAK-eval ROCm: torch.testing.assert_close(atol=1e-2, rtol=1e-2)", "kind": "allclose",
                  "atol": 1e-2, "rtol": 1e-2, "check_dtype": True, "equal_nan": False}
LICENCE = "LicenseRef-AMD-all-rights-reserved"


def _instructions(opts: dict[str, str]) -> dict[str, str]:
    if not opts.get("instructions"):
        return {}
    path = Path(opts["instructions"]).expanduser()
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{PREFIX}: cannot read instructions {path}: {exc}",
                            hint='a JSON list of {"instruction": ..., "file": ...}') from exc
    return {Path(i["file"]).name: i["instruction"] for i in items if isinstance(i, dict) and i.get("file")
            and i.get("instruction")}


def load(rest: str) -> list[Task]:
    root, folder, files, opts = common.select_files(rest, PREFIX, FOLDERS, "ROCmBench files", ("instructions",))
    instructions = _instructions(opts)
    tasks = []
    for path in files:
        kernel, tests, _ = common.split_at_separator(common.read_text(path), path)
        content_prov, volatile = common.split_provenance(common.provenance("ROCmBench", "AMD-AGI/GEAK-eval", root, path))
        text = instructions.get(path.name)
        meta = {
            "benchmark": PREFIX, "benchmark_rule": BENCHMARK_RULE,
            "licence": common.detect_licence(folder, root) or LICENCE,
            "licence_note": "GEAK-eval's ROCm files say 'Copyright AMD, all rights reserved'; not redistributable",
            "redistributable": False,
            "instruction": {"instruction": text} if text else None,
            "description": f"ROCmBench {path.name}",
        }
        tasks.append(build_task(benchmark=PREFIX, task_id=path.stem, kernel=kernel, tests=tests,
                                style="pytest", provenance=content_prov, metadata=meta, volatile=volatile))
    return tasks
