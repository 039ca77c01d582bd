"""`tritonbench-g:PATH`: TritonBench-G as amdkv tasks (docs/benchmarks.md).

PATH is a checkout of thunlp/TritonBench (files in `data/TritonBench_G_v1/`, index
`data/TritonBench_G_v1.json`, instructions `data/TritonBench_G_{simp,comp}_alpac_v1.json`), of
AMD-AGI/GEAK-eval (its revised copy in `geak_eval/data/TritonBench/data/TritonBench_G_v1/`, no index:
pass `?index=` pointing at TritonBench's JSON to get the instructions), or the folder of files itself.

Each file: kernel code, a line of 146 '#', then test code whose `test_*()` returns the outputs
(`result_gold = test_x()`). A candidate replaces the part above the line. The index carries `file,
repo, simp_instru, comp_instru, output, difficulty, star`; the instructions go into
`metadata["instruction"]` for the prompts module (docs/benchmarks.md, "Prompts").

Options: `?index=FILE` (the index JSON), `?only=a.py,b.py` (a subset, e.g. for a quick run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError
from amdkv.tasks.external import common
from amdkv.tasks.external.kernel_file import build_task
from amdkv.tasks.types import Task

PREFIX = "tritonbench-g"
FOLDERS = ("data/TritonBench_G_v1", "geak_eval/data/TritonBench/data/TritonBench_G_v1")
# The benchmark's own rule as GEAK-eval applies it (torch.allclose of the tests' outputs at a fixed
# 1e-3); TritonBench's own 1_exe_acc.py compares the two files' printed stdout, which for the ~150
# files that print nothing is always equal (docs/benchmarks.md).
BENCHMARK_RULE = {"name": "GEAK-eval TritonBench-G: torch.allclose(atol=1e-3, rtol=1e-3)", "kind": "allclose",
                  "atol": 1e-3, "rtol": 1e-3, "check_dtype": False, "equal_nan": False}
INSTRUCTION_STYLES = ("simp_instru", "comp_instru")


def _find_json(root: Path, folder: Path, name: str) -> Path | None:
    for cand in (folder.parent / name, root / "data" / name, root / name):
        if cand.is_file():
            return cand
    return None


def _index(root: Path, folder: Path, opts: dict[str, str]) -> dict[str, dict[str, Any]]:
    """file name -> index entry (plus the alpaca-format full prompts when present)."""
    path = Path(opts["index"]).expanduser() if opts.get("index") else _find_json(root, folder, "TritonBench_G_v1.json")
    if path is None:
        return {}
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInputError(f"{PREFIX}: cannot read the index {path}: {exc}",
                            hint="pass ?index= with TritonBench's data/TritonBench_G_v1.json") from exc
    by_file = {e["file"]: dict(e) for e in entries if isinstance(e, dict) and e.get("file")}
    by_output = {e.get("output"): e for e in by_file.values()}
    for style, name in (("simp", "TritonBench_G_simp_alpac_v1.json"), ("comp", "TritonBench_G_comp_alpac_v1.json")):
        alpaca = path.parent / name
        if alpaca.is_file():
            for item in json.loads(alpaca.read_text(encoding="utf-8")):
                entry = by_output.get(item.get("output"))
                if entry is not None:
                    entry[f"{style}_prompt"] = item.get("instruction")
    return by_file


def load(rest: str) -> list[Task]:
    root, folder, files, opts = common.select_files(rest, PREFIX, FOLDERS, "TritonBench-G files", ("index",))
    index = _index(root, folder, opts)
    licence = common.detect_licence(folder, root) or "Apache-2.0"
    repo = "AMD-AGI/GEAK-eval" if "geak_eval" in folder.parts else "thunlp/TritonBench"
    tasks = []
    for path in files:
        kernel, tests, _ = common.split_at_separator(common.read_text(path), path)
        entry = index.get(path.name, {})
        content_prov, volatile = common.split_provenance(common.provenance("TritonBench-G", repo, root, path))
        instruction = {k: entry[k] for k in ("simp_instru", "comp_instru", "simp_prompt", "comp_prompt") if entry.get(k)}
        meta = {
            "benchmark": PREFIX, "benchmark_rule": BENCHMARK_RULE, "licence": licence,
            "upstream_repo": entry.get("repo"),
            "licence_note": ("TritonBench-G collects kernels from public repositories (`upstream_repo`); "
                             "TritonBench publishes them under its repository licence"),
            "difficulty": int(entry["difficulty"]) if str(entry.get("difficulty", "")).isdigit() else None,
            "star": int(entry["star"]) if str(entry.get("star", "")).isdigit() else None,
            "instruction": instruction or None, "instruction_styles": list(INSTRUCTION_STYLES),
            "description": (entry.get("simp_instru") or f"TritonBench-G {path.name}").strip().split("\n")[0][:200],
        }
        tasks.append(build_task(benchmark=PREFIX, task_id=path.stem, kernel=kernel, tests=tests,
                                style="tritonbench", provenance=content_prov, metadata=meta, volatile=volatile))
    return tasks
