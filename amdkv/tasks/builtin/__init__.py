"""The bundled task suites and their reference solutions.

Layout (one file per task, the file stem is the task id, unique across suites):
  builtin/<suite>/<task_id>.py                 the task (KernelBench format + METADATA + get_cases)
  builtin/solutions/<language>/<task_id>.py    an original reference solution defining ModelNew
"""

from __future__ import annotations

from pathlib import Path

BUILTIN_ROOT = Path(__file__).resolve().parent
SOLUTIONS_ROOT = BUILTIN_ROOT / "solutions"
LANGUAGES = ("triton", "hip")


def suite_names() -> list[str]:
    """Suites are the folders under builtin/ that hold task files (solutions/ excluded)."""
    return sorted(p.name for p in BUILTIN_ROOT.iterdir()
                  if p.is_dir() and p.name not in ("solutions", "__pycache__") and any(p.glob("*.py")))


def task_files(suite: str | None = None) -> list[Path]:
    suites = [suite] if suite else suite_names()
    files: list[Path] = []
    for s in suites:
        files += sorted(p for p in (BUILTIN_ROOT / s).glob("*.py") if not p.name.startswith("_"))
    return files


def task_path(task_id: str) -> Path | None:
    """Path of the bundled task file with this id (in any suite), or None."""
    return next((p for p in task_files() if p.stem == task_id), None)


def solution_path(task_id: str, language: str = "triton") -> Path | None:
    """Path of the bundled reference solution, or None when the task has none in that language."""
    p = SOLUTIONS_ROOT / language / f"{task_id}.py"
    return p if p.is_file() else None
