"""`amdkv tasks ingest SOURCE --out DIR`: corpus rows -> checked, licensed, de-duplicated task files.

Order (cheap and decisive first; every dropped row gets one reason):
 1. licence: every licence the row names is on the allow-list (`no_licence`, `licence_not_allowed`);
 2. static, on the AST (`syntax_error`, `empty_code`, `missing_entry_point`, `missing_function`);
 3. exact duplicates of an earlier row, ignoring comments/docstrings/whitespace (`exact_duplicate`);
 4. the checks of amdkv.tasks.checks in a sandboxed process per row (`import_error`, `load_error`,
    `task_format`, `reference_error`, `nondeterministic`, `constant_output`, `all_zero_output`,
    `non_finite_output`, `no_tensor_output`, `sandbox_violation`, `timeout`, `crashed`);
 5. near duplicates of an earlier kept row, MinHash LSH (`near_duplicate`): after the checks, so
    that a row is only ever called a duplicate of a row that was kept.
Kept rows become `DIR/<task id>.py` (loadable with `load_suite(DIR)`), and `DIR/ingest_report.json`
says what came in, what was kept, and what was dropped and why (counts, examples, every row).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import amdkv
from amdkv.errors import BadInputError
from amdkv.tasks.ingest import adapt, dedup, licences
from amdkv.tasks.ingest.sources import KERNELBOOK, SourceRow, read_source

REPORT_FILE = "ingest_report.json"
STAGING = ".ingest-staging"
CHECK_WORKER = "amdkv.tasks.ingest.check_worker"
EXAMPLES_PER_REASON = 5
DTYPE_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "int8",
               "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool"}


@dataclasses.dataclass
class IngestSettings:
    source: str
    out: str
    corpus: str | None = None                      # name in ids and provenance (default: from the source)
    allowed_licences: tuple[str, ...] = licences.DEFAULT_ALLOWED
    default_licence: str | None = None             # for rows that name none (e.g. a KernelBench folder)
    near_duplicate_threshold: float = dedup.DEFAULT_THRESHOLD
    trials: int = 3                                # the verifier's seeded trials per case
    timeout: float = 60.0                          # seconds per row's sandboxed checks
    jobs: int = 2
    limit: int | None = None                       # only the first N rows
    force: bool = False                            # replace an earlier ingest in --out


@dataclasses.dataclass
class RowOutcome:
    index: int
    label: str
    kept: bool
    reason: str | None = None
    message: str = ""
    task_id: str | None = None
    duplicate_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None and v != ""}


# ----------------------------------------------------------------------------------- helpers
def _corpus_name(settings: IngestSettings, layout: str) -> str:
    if settings.corpus:
        return settings.corpus
    return "kernelbook" if layout == KERNELBOOK else adapt.slug(Path(settings.source).resolve().name) or "corpus"


def _task_id(corpus: str, row: SourceRow, taken: set[str]) -> str:
    if row.layout == KERNELBOOK:
        short = str(row.fields.get("uuid") or dedup.exact_key(row.code or "")[:8]).replace("-", "")[:8]
        base = f"{adapt.slug(corpus, 20)}_{adapt.slug(row.entry_point)}_{adapt.slug(short, 8)}"
    else:
        path = Path(str(row.fields.get("path", row.index)))
        level = f"l{row.fields['level']}_" if "level" in row.fields else ""
        base = f"{adapt.slug(corpus, 20)}_{level}{adapt.slug(path.stem)}"
    task_id, n = base, 1
    while task_id in taken:
        n += 1
        task_id = f"{base}_{n}"
    taken.add(task_id)
    return task_id


def _metadata(corpus: str, row: SourceRow, task_id: str, licence: str, settings: IngestSettings) -> dict[str, Any]:
    where = ", ".join(f"{k} {row.fields[k]}" for k in ("repo_name", "sha", "uuid", "path") if k in row.fields)
    return {
        "id": task_id,
        "suite": corpus,
        "level": row.fields.get("level"),
        "op_family": "unknown",
        "dtypes": [],
        "licence": licence,
        "provenance": f"{corpus} row {row.index}" + (f" ({where})" if where else ""),
        "description": f"{row.entry_point} from {row.fields.get('repo_name') or row.fields.get('path') or corpus}",
        "source": {"corpus": corpus, "row": row.index, "entry_point": row.entry_point,
                   **{k: v for k, v in row.fields.items() if k not in ("read_error",)}},
        "ingest": {"amdkv_version": amdkv.__version__, "source": str(Path(settings.source).resolve())},
    }


def _prepare_out(settings: IngestSettings) -> Path:
    out = Path(settings.out)
    if out.exists() and not out.is_dir():
        raise BadInputError(f"--out {out} is a file", hint="pass a folder (it is created if missing)")
    existing = [p for p in out.iterdir() if p.name != STAGING] if out.is_dir() else []
    if existing:
        earlier = (out / REPORT_FILE).is_file()
        foreign = [p.name for p in existing if not (p.name == REPORT_FILE or (earlier and p.suffix == ".py"))]
        if foreign or not settings.force:
            raise BadInputError(
                f"--out {out} is not empty ({len(existing)} entries, e.g. {existing[0].name})",
                hint="pass an empty or new folder" + ("" if foreign else ", or --force to replace the earlier ingest"))
        for p in existing:  # an earlier ingest's task files and report, nothing else
            p.unlink()
    shutil.rmtree(out / STAGING, ignore_errors=True)
    (out / STAGING).mkdir(parents=True)
    return out


def sandboxed_check(task_file: Path, trials: int, timeout: float) -> dict[str, Any]:
    """The check worker's report for one task file, or a timeout/crash report."""
    from amdkv.config import VerifierConfig
    from amdkv.verify import os_sandbox
    from amdkv.verify.sandbox import run_python_module, with_package_on_path

    with tempfile.TemporaryDirectory(prefix="amdkv-ingest-check-") as tmp:
        report = Path(tmp) / "report.json"
        env = with_package_on_path(os.environ)
        # CPU only: no GPU is shown to the row; Triton (if a row uses it) runs under its interpreter,
        # which also gives the fork server that skips importing torch._inductor (GPU spares need it)
        env.update({"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "",
                    "TRITON_INTERPRET": "1"})
        res = run_python_module(CHECK_WORKER, [str(task_file), str(report), str(trials)], timeout=timeout, env=env,
                                cwd=tmp, host_memory_bytes=8 << 30,  # + the OS sandbox (docs/sandbox.md)
                                sandbox=os_sandbox.plan(VerifierConfig.from_env().sandbox, writable=[tmp],
                                                        readable=[str(task_file)]))
        if res.timed_out:
            return {"ok": False, "reason": "timeout", "message": f"the checks did not finish within {timeout:g} s"}
        if not report.is_file():
            why = res.signal_name or f"exit code {res.returncode}"
            return {"ok": False, "reason": "crashed",
                    "message": f"the check process died ({why}): {res.stderr.strip()[-800:]}"}
        return json.loads(report.read_text())


# ----------------------------------------------------------------------------------- pipeline
def ingest(settings: IngestSettings, *, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the whole ingestion; returns the report (also written to OUT/ingest_report.json)."""
    t0 = time.monotonic()
    if settings.jobs < 1 or settings.trials < 1 or settings.timeout <= 0:
        raise BadInputError("--jobs and --trials must be >= 1 and --timeout > 0", hint="e.g. --jobs 2 --trials 3")
    if not 0.0 < settings.near_duplicate_threshold <= 1.0:
        raise BadInputError(f"--near-dup-threshold {settings.near_duplicate_threshold} is not in (0, 1]",
                            hint="e.g. 0.85")
    layout, rows = read_source(settings.source)
    if settings.limit is not None:
        rows = rows[:settings.limit]
    corpus = _corpus_name(settings, layout)
    out = _prepare_out(settings)
    staging = out / STAGING
    outcomes: dict[int, RowOutcome] = {}
    taken: set[str] = set()
    seen_exact: dict[str, str] = {}
    to_check: list[tuple[SourceRow, str, Path]] = []
    metadata: dict[str, dict[str, Any]] = {}

    # 1-3: licence, static, exact duplicates (this process; nothing of the row runs)
    for row in rows:
        found = licences.parse_licences(row.licences)
        if not found and settings.default_licence:
            found = licences.parse_licences(settings.default_licence)
        reason, text = licences.licence_verdict(found, settings.allowed_licences)
        if reason:
            outcomes[row.index] = RowOutcome(row.index, row.label, False, reason, text)
            continue
        problem = adapt.static_problem(row)
        if problem:
            outcomes[row.index] = RowOutcome(row.index, row.label, False, *problem)
            continue
        assert row.code is not None
        key = dedup.exact_key(row.code)
        if key in seen_exact:
            outcomes[row.index] = RowOutcome(row.index, row.label, False, "exact_duplicate",
                                             f"same code as {seen_exact[key]}", duplicate_of=seen_exact[key])
            continue
        task_id = _task_id(corpus, row, taken)
        seen_exact[key] = task_id
        path = staging / f"{task_id}.py"
        metadata[task_id] = _metadata(corpus, row, task_id, text, settings)
        path.write_text(adapt.task_source(row, metadata[task_id]))
        to_check.append((row, task_id, path))

    # 4: sandboxed checks, `jobs` rows at a time (each its own process)
    done = [0]
    lock = threading.Lock()

    def check(item: tuple[SourceRow, str, Path]) -> dict[str, Any]:
        res = sandboxed_check(item[2], settings.trials, settings.timeout)
        with lock:
            done[0] += 1
            if progress:
                progress(done[0], len(to_check))
        return res

    with ThreadPoolExecutor(max_workers=settings.jobs) as pool:
        results = list(pool.map(check, to_check))

    # 5: near duplicates among the rows that passed, in source order
    near = dedup.NearDuplicates(settings.near_duplicate_threshold)
    kept: list[tuple[SourceRow, str, dict[str, Any]]] = []
    for (row, task_id, path), res in zip(to_check, results):
        if not res.get("ok"):
            outcomes[row.index] = RowOutcome(row.index, row.label, False, res.get("reason") or "check_failed",
                                             res.get("message", ""), task_id=task_id)
            continue
        dup = near.offer(task_id, row.code or "")
        if dup:
            outcomes[row.index] = RowOutcome(row.index, row.label, False, "near_duplicate",
                                             f"estimated Jaccard {dup[1]:.2f} with {dup[0]}", task_id=task_id,
                                             duplicate_of=dup[0])
            continue
        outcomes[row.index] = RowOutcome(row.index, row.label, True, task_id=task_id)
        kept.append((row, task_id, res))

    for row, task_id, res in kept:  # the checked file, its METADATA naming the dtypes the checks saw
        meta = dict(metadata[task_id], dtypes=sorted({DTYPE_NAMES[d] for d in res.get("input_dtypes", [])
                                                      if d in DTYPE_NAMES}))
        (out / f"{task_id}.py").write_text(adapt.task_source(row, meta))
    shutil.rmtree(staging, ignore_errors=True)

    ordered = [outcomes[r.index] for r in rows]
    dropped = collections.Counter(o.reason for o in ordered if not o.kept)
    examples: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for o in ordered:
        if not o.kept and len(examples[o.reason or ""]) < EXAMPLES_PER_REASON:
            examples[o.reason or ""].append(o.to_dict())
    report = {
        "source": str(Path(settings.source).resolve()), "corpus": corpus, "layout": layout, "out": str(out.resolve()),
        "rows_in": len(rows), "kept": len(kept), "dropped": sum(dropped.values()),
        "dropped_by_reason": dict(dropped.most_common()), "examples": dict(examples),
        "settings": {"allowed_licences": list(settings.allowed_licences), "default_licence": settings.default_licence,
                     "near_duplicate_threshold": settings.near_duplicate_threshold, "trials": settings.trials,
                     "timeout_s": settings.timeout, "limit": settings.limit},
        "seconds": round(time.monotonic() - t0, 2), "amdkv_version": amdkv.__version__,
        "rows": [o.to_dict() for o in ordered],
    }
    tmp = out / (REPORT_FILE + ".tmp")
    tmp.write_text(json.dumps(report, indent=1))
    os.replace(tmp, out / REPORT_FILE)
    return report
