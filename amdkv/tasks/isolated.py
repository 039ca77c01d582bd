"""Tasks from source text that this process must not run: load their metadata in a sandboxed child.

Loading a task file imports it (loader.py), and a task sent to `amdkv serve` as `task_source` is a
client's code. The service must not import it into its own process: one `import` could read the
service's memory (its token), patch the verifier, or hang its event loop. So:

1. the source is written content-addressed under the config's cache dir
   (`<cache_dir>/task-sources/<sha[:2]>/<sha256>/task_<sha[:12]>.py`), where worker processes can import it;
2. a child process (`amdkv.tasks.isolated_worker`, through `sandbox.run_python_module`: its own
   process group, a timeout, the host-memory cap, no GPU visible) loads it with the ordinary
   `load_task` and writes its description (id, METADATA fields, and per case the name, tags,
   flops, min_bytes and JSON-safe `extra`) as JSON;
3. this process builds a `Task` from that description, whose cases' `make_inputs` raise if ever
   called here.

Why the parent needs no more than that: the verifier's parent reads a task's id, source, path,
dtypes, comparator, tolerance, metadata and its cases' names, tags and flops; inputs, the
reference `Model` and `get_init_inputs` are built only by worker processes, which import the
task file from `task.path` themselves (worker_jobs.run_reference_job; the candidate worker gets
its init inputs from the reference's inputs file; the HIP capture worker imports the task file).

What this does NOT do: make a hostile task safe. The reference worker later runs the task's
`Model` with the service user's rights, as it runs any task; see docs/serve.md (trust model).

Standard library only at import; the sandbox is imported when a load runs.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

from amdkv.errors import InfrastructureError, TaskFormatError
from amdkv.tasks.types import CASE_TAGS, COMPARATORS, Case, Task, source_sha256

WORKER_MODULE = "amdkv.tasks.isolated_worker"
DEFAULT_TIMEOUT_S = 60.0
MAX_DESCRIPTION_BYTES = 4 << 20
SOURCES_DIR = "task-sources"
# A GPU is never needed to read a task's metadata, and a task's import must not touch one.
_NO_GPU = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ROCR_VISIBLE_DEVICES": ""}


def stored_task_path(source: str, cache_dir: str | os.PathLike[str]) -> Path:
    """The content-addressed file of `source` under `cache_dir` (written once, atomically)."""
    sha = source_sha256(source)
    # the file stem is the task's id when neither the caller nor METADATA names one
    path = Path(cache_dir).expanduser() / SOURCES_DIR / sha[:2] / sha / f"task_{sha[:12]}.py"
    if path.is_file() and path.read_bytes() == source.encode("utf-8", errors="surrogatepass"):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as fh:
        fh.write(source)
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------ the description
def _json_safe(value: Any) -> Any:
    """JSON types only: other values (callables, tensors) become their repr; non-finite floats None."""
    return json.loads(json.dumps(value, default=repr, allow_nan=True),
                      parse_constant=lambda _: None)


def describe_task(task: Task) -> dict[str, Any]:
    """What the parent needs of a task, as JSON-safe data (the worker's output)."""
    return {
        "id": task.id, "suite": task.suite, "level": task.level, "op_family": task.op_family,
        "dtypes": list(task.dtypes), "comparator": task.comparator, "tolerance": _json_safe(task.tolerance),
        "licence": task.licence, "provenance": task.provenance, "description": task.description,
        "split": task.split, "metadata": _json_safe(task.metadata),
        "cases": [{"name": c.name, "tags": list(c.tags), "flops": _json_safe(c.flops),
                   "min_bytes": c.min_bytes, "extra": _json_safe(c.extra)} for c in task.cases],
    }


def _inputs_only_in_workers(task_id: str, case: str) -> Callable[[], list[Any]]:
    def refuse() -> list[Any]:
        raise InfrastructureError(
            f"case {case!r} of task {task_id!r} was loaded in isolation: its inputs are built only in "
            "worker processes, never in this one",
            hint="import the task file in a worker process (amdkv.tasks.loader.load_task(task.path))")
    return refuse


def _typed(desc: dict[str, Any], key: str, kinds: tuple[type, ...], default: Any = None) -> Any:
    value = desc.get(key, default)
    if value is not None and not isinstance(value, kinds):
        raise TaskFormatError(f"the task's {key} is {type(value).__name__}, not {kinds[0].__name__}",
                              hint=f"fix METADATA[{key!r}] in the task file")
    return value


def task_from_description(desc: dict[str, Any], *, path: Path, source: str, task_id: str | None = None) -> Task:
    """A Task from a worker's description, every field type-checked (the description came from a
    process that ran untrusted code)."""
    cases = []
    raw_cases = desc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        raise TaskFormatError("the task source has no cases", hint="define get_inputs() or get_cases()")
    tid = task_id or _typed(desc, "id", (str,)) or path.stem
    for raw in raw_cases:
        name = raw.get("name") if isinstance(raw, dict) else None
        tags = raw.get("tags") if isinstance(raw, dict) else None
        if not isinstance(name, str) or not isinstance(tags, list) or not tags or any(t not in CASE_TAGS for t in tags):
            raise TaskFormatError(f"a case of the task source is malformed: {str(raw)[:200]}",
                                  hint=f"each case has a name and tags from {list(CASE_TAGS)}")
        flops, min_bytes = raw.get("flops"), raw.get("min_bytes")
        if flops is not None and (isinstance(flops, bool) or not isinstance(flops, (int, float))):
            raise TaskFormatError(f"case {name!r}: flops must be a number", hint="fix get_cases()")
        if min_bytes is not None and (isinstance(min_bytes, bool) or not isinstance(min_bytes, int)):
            raise TaskFormatError(f"case {name!r}: min_bytes must be an integer", hint="fix get_cases()")
        extra = raw.get("extra") if isinstance(raw.get("extra"), dict) else {}
        cases.append(Case(name=name, tags=tuple(tags), make_inputs=_inputs_only_in_workers(tid, name),
                          flops=flops, min_bytes=min_bytes, extra=extra))
    comparator = _typed(desc, "comparator", (str,), "default") or "default"
    if comparator not in COMPARATORS:
        raise TaskFormatError(f"the task names comparator {comparator!r}", hint=f"use one of {list(COMPARATORS)}")
    dtypes = _typed(desc, "dtypes", (list,), []) or []
    level = _typed(desc, "level", (int,))
    return Task(id=tid, path=str(path), source=source, suite=_typed(desc, "suite", (str,), "custom") or "custom",
                level=level, op_family=_typed(desc, "op_family", (str,), "unknown") or "unknown",
                dtypes=tuple(str(d) for d in dtypes), comparator=comparator,
                tolerance=_typed(desc, "tolerance", (dict,), {}) or {},
                licence=_typed(desc, "licence", (str,), "unknown") or "unknown",
                provenance=_typed(desc, "provenance", (str,), "unknown") or "unknown",
                description=_typed(desc, "description", (str,), "") or "",
                split=_typed(desc, "split", (str,)), cases=cases,
                metadata=_typed(desc, "metadata", (dict,), {}) or {})


# ------------------------------------------------------------------------------ loading
def load_task_isolated(source: str, *, cache_dir: str | os.PathLike[str], task_id: str | None = None,
                       timeout: float = DEFAULT_TIMEOUT_S, start: str = "auto",
                       mem_cap_bytes: int | None = None, extra_env: Mapping[str, str] | None = None,
                       sandbox: str = "auto") -> Task:
    """The Task of `source`, loaded in a sandboxed child (never imported here). A task that does
    not load (syntax error, no Model, bad METADATA, crash, hang) is a TaskFormatError saying why.
    `extra_env`: e.g. the verifier's TRITON_INTERPRET, so the child forks from the verifier's own
    fork server (fork_server.IMPORT_TIME_ENV) instead of starting another."""
    from amdkv.verify import os_sandbox
    from amdkv.verify.sandbox import run_python_module, with_package_on_path

    if not isinstance(source, str) or not source.strip():
        raise TaskFormatError("the task source is empty", hint="send the text of a KernelBench-format task file")
    path = stored_task_path(source, cache_dir)
    with tempfile.TemporaryDirectory(prefix="amdkv-task-load-") as tmp:
        out = Path(tmp) / "task.json"
        env = with_package_on_path(os.environ)
        env.update(extra_env or {})
        env.update(_NO_GPU)
        res = run_python_module(WORKER_MODULE, [str(path), str(out)], timeout=timeout, env=env, cwd=tmp,
                                host_memory_bytes=mem_cap_bytes, start=start,
                                sandbox=os_sandbox.plan(sandbox, writable=[tmp], readable=[str(path)]))
        report = _read_report(out)
    if report is None:
        if res.timed_out:
            raise TaskFormatError(f"loading the task source did not finish within {timeout:.0f} s",
                                  hint="a task file's import must be quick: build tensors in get_inputs(), not at import")
        why = res.signal_name or f"exit code {res.returncode}"
        raise TaskFormatError(f"the task source crashed the process that loaded it ({why}): "
                              f"{res.stderr.strip()[-1500:]}", hint="load the file locally with `amdkv tasks list --from FILE`")
    if "error" in report:
        err = report["error"] if isinstance(report["error"], dict) else {"message": str(report["error"])}
        raise TaskFormatError(f"the task source does not load: {err.get('message')}",
                              hint=err.get("hint") or "load the file locally with `amdkv tasks list --from FILE`")
    return task_from_description(report.get("task") or {}, path=path, source=source, task_id=task_id)


def _read_report(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_DESCRIPTION_BYTES:
            return {"error": {"message": f"its description is larger than {MAX_DESCRIPTION_BYTES} bytes",
                              "hint": "keep METADATA and case extras small"}}
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        return {"error": {"message": f"its description is unreadable ({exc})", "hint": None}}
    return data if isinstance(data, dict) else {"error": {"message": "its description is not an object"}}


class IsolatedTaskCache:
    """Isolated loads, remembered by (source hash, task id): a task source is loaded once per
    process however many requests carry it, and concurrent requests with the same new source wait
    for one load (single flight). Failures are not remembered (the next request tries again).
    Bounded: the least recently used entry goes first."""

    def __init__(self, loader: Callable[..., Task], max_entries: int = 256) -> None:
        self._loader = loader
        self._max = max(1, max_entries)
        self._tasks: collections.OrderedDict[tuple[str, str | None], Task] = collections.OrderedDict()
        self._locks: dict[tuple[str, str | None], threading.Lock] = {}
        self._guard = threading.Lock()
        self.loads = 0   # loads actually run (tests and /v1/health read it)

    def get(self, source: str, task_id: str | None = None) -> Task:
        key = (source_sha256(source), task_id)
        with self._guard:
            if key in self._tasks:
                self._tasks.move_to_end(key)
                return self._tasks[key]
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            with self._guard:
                if key in self._tasks:
                    return self._tasks[key]
            try:
                task = self._loader(source, task_id=task_id)
                with self._guard:
                    self.loads += 1
                    self._tasks[key] = task
                    while len(self._tasks) > self._max:
                        self._tasks.popitem(last=False)
                return task
            finally:
                with self._guard:
                    self._locks.pop(key, None)

    def __len__(self) -> int:
        return len(self._tasks)
