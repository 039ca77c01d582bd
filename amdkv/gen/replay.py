"""Replay clients: the agent loop without a model, deterministically.

`StoredReplay` serves replies stored earlier, found by (task, sample, turn) from the request's
`RequestContext`:
- a samples file (`{"task_id", "samples", "turns"?}` lines, the `amdkv eval` format): run j's
  turn t is the t-th sample of the j-th run, fenced as a Python program;
- a record store (or an earlier `amdkv gen` run folder, whose store is `records/`): sample j's
  turn t is that trajectory's reply
  (with its reasoning), verbatim;
- a dataset folder (`load_dataset`): rows with `task_id` and `turns` (the `trajectories`
  config) or `task_id` and a program column (`code`, `candidate`, `source`, `completion`).
A (task, sample, turn) with nothing stored raises `ReplayExhausted`: that trajectory ends there.

`ScriptedReplay` answers each stage the way a model should, from a correct program per task (the
task's reference solution, or the first program stored for it in a samples file): `write` by a
scripted action (default: the solution), every `fix_*` stage with the solution, `optimise` with
the solution unchanged (the agent then stops: nothing new to verify). Actions that produce bad
replies on purpose (`SCRIPT_ACTIONS`) make the failure paths testable: `compile_error` (the
solution with a line that is not Python), `no_code` (prose only), `truncated` (an unclosed fence
cut halfway, finish_reason `length`), `conflict` (two different programs: a broken one, then the
solution last), `think` (a `<think>` block before the solution).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from amdkv.data.records import TRAJECTORY
from amdkv.data.store import open_store, store_path
from amdkv.errors import BadInputError
from amdkv.gen.llm import ClientStats, Message, Reply, ReplayExhausted, RequestContext, SamplingParams

SCRIPT_ACTIONS = ("solution", "compile_error", "no_code", "truncated", "conflict", "think")
PROGRAM_COLUMNS = ("code", "candidate", "source", "completion")
DEFAULT_SCRIPT = {"write": "solution"}


def fenced(code: str, text: str = "Here is the program.") -> str:
    return f"{text}\n\n```python\n{code.rstrip()}\n```\n"


class _ReplayBase:
    """Counts replies like a real client (no tokens: nothing was generated)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.stats = ClientStats()

    def _served(self, replies: list[Reply]) -> list[Reply]:
        self.stats.add(requests=1, replies=len(replies))
        return replies

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------- stored
class StoredReplay(_ReplayBase):
    """Replies by (task_id, sample, turn), see the module docstring. `runs[task_id][j][t]` is the
    reply of run j at turn t."""

    def __init__(self, runs: Mapping[str, Sequence[Sequence[Reply]]], model: str = "replay") -> None:
        super().__init__(model)
        self.runs = {k: [list(r) for r in v] for k, v in runs.items()}

    @property
    def content_sha256(self) -> str:
        """What this client would answer, hashed: a run folder's identity (gen/rundir.py) holds it,
        so a re-run that replays other replies (another file of the same name, an edited file) is
        refused instead of resumed into the same folder."""
        body = {task: [[reply.to_dict() for reply in run] for run in runs] for task, runs in sorted(self.runs.items())}
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()

    @classmethod
    def from_path(cls, path: str | Path, model: str | None = None) -> "StoredReplay":
        path = Path(path)
        if path.is_file():
            runs = _runs_from_samples_file(path)
        elif path.is_dir() and store_path(path) is not None:
            runs = _runs_from_records(path)
        elif path.is_dir():
            runs = _runs_from_dataset(path)
        else:
            raise BadInputError(f"nothing to replay at {path}",
                                hint="pass a samples file (.jsonl), a records folder or a dataset folder")
        if not runs:
            raise BadInputError(f"{path} holds no replies to replay", hint="check the path and its format")
        return cls(runs, model=model or f"replay:{path.name}")

    def coverage(self, task_id: str) -> int:
        """How many runs (samples) are stored for a task."""
        return len(self.runs.get(task_id, ()))

    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        if context is None:
            raise BadInputError("the replay client needs each request's context (task, sample, turn)",
                                hint="call chat(..., context=RequestContext(task_id, sample, turn))")
        runs = self.runs.get(context.task_id, [])
        first = context.sample
        out = []
        for j in range(first, first + n):
            if j >= len(runs) or context.turn >= len(runs[j]):
                raise ReplayExhausted(f"no stored reply for task {context.task_id} sample {j} turn {context.turn}")
            out.append(Reply(**{**runs[j][context.turn].to_dict(), "cached": False}))
        return self._served(out)


def _runs_from_samples_file(path: Path) -> dict[str, list[list[Reply]]]:
    from amdkv.evaluation.samples import TaskSamples

    runs: dict[str, list[list[Reply]]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ts = TaskSamples(task_id=row["task_id"], line=n, samples=tuple(row["samples"]),
                             turns=tuple(row["turns"]) if row.get("turns") is not None else None)
        except (ValueError, KeyError, TypeError) as exc:
            raise BadInputError(f"{path}:{n}: not a samples line ({exc})",
                                hint='lines are {"task_id": ..., "samples": [...], "turns": [...]?}') from exc
        task_runs: list[list[Reply]] = [[] for _ in range(ts.n_runs)]
        for i, run in enumerate(ts.run_indices):
            task_runs[run].append(Reply(content=fenced(ts.samples[i]), finish_reason="stop"))
        runs.setdefault(ts.task_id, []).extend(task_runs)
    return runs


def _runs_from_records(path: Path) -> dict[str, list[list[Reply]]]:
    by_task: dict[str, list[tuple[int, list[Reply]]]] = {}
    for rec in open_store(path).dicts(TRAJECTORY):
        traj = rec["trajectory"]
        replies = [Reply(content=t["reply"], reasoning_content=t.get("reasoning"), finish_reason=t.get("finish_reason"))
                   for t in traj["turns"]]
        by_task.setdefault(traj["task_id"], []).append((int(rec["origin"].get("sample", 0)), replies))
    return {k: [r for _, r in sorted(v, key=lambda x: x[0])] for k, v in by_task.items()}


def _runs_from_dataset(path: Path) -> dict[str, list[list[Reply]]]:
    from datasets import load_dataset

    ds = load_dataset(str(path))
    runs: dict[str, list[list[Reply]]] = {}
    for split in ds.values():
        column = next((c for c in PROGRAM_COLUMNS if c in split.column_names), None)
        if "task_id" not in split.column_names or ("turns" not in split.column_names and column is None):
            raise BadInputError(f"{path}: rows need `task_id` and `turns` or one of {PROGRAM_COLUMNS}",
                                hint="replay a trajectories config or a config with a program column")
        for row in split:
            if "turns" in split.column_names:
                run = [Reply(content=t["reply"], reasoning_content=t.get("reasoning"), finish_reason=t.get("finish_reason"))
                       for t in row["turns"]]
            else:
                run = [Reply(content=fenced(row[column]), finish_reason="stop")]
            runs.setdefault(row["task_id"], []).append(run)
    return runs


# -------------------------------------------------------------------------------------- scripted
def parse_script(text: str | None) -> dict[str, str]:
    """`write=compile_error,fix_compile=solution` -> {stage: action}; unknown names are refused."""
    from amdkv.prompts.stages import STAGES

    script = dict(DEFAULT_SCRIPT)
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        stage, sep, action = part.partition("=")
        if not sep or stage not in STAGES or action not in SCRIPT_ACTIONS:
            raise BadInputError(f"bad script entry {part!r}",
                                hint=f"STAGE=ACTION with stages {', '.join(STAGES)} and actions {', '.join(SCRIPT_ACTIONS)}")
        script[stage] = action
    return script


class ScriptedReplay(_ReplayBase):
    """See the module docstring. `solution(task_id)` returns the correct program or None."""

    def __init__(self, solution: Callable[[str], str | None], script: Mapping[str, str] | None = None,
                 model: str = "scripted") -> None:
        super().__init__(model)
        self.solution = solution
        self.script = {**DEFAULT_SCRIPT, **dict(script or {})}
        for action in self.script.values():
            if action not in SCRIPT_ACTIONS:
                raise BadInputError(f"unknown script action {action!r}", hint=f"actions: {', '.join(SCRIPT_ACTIONS)}")

    def coverage(self, task_id: str) -> int:
        return 10**9 if self.solution(task_id) is not None else 0

    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        if context is None:
            raise BadInputError("the scripted client needs each request's context (task, stage)",
                                hint="call chat(..., context=RequestContext(task_id, sample, turn, stage))")
        code = self.solution(context.task_id)
        if code is None:
            raise ReplayExhausted(f"no solution to script for task {context.task_id}")
        action = self.script.get(context.stage, "solution")
        return self._served([scripted_reply(action, code) for _ in range(n)])


def scripted_reply(action: str, code: str) -> Reply:
    """The reply a scripted model gives for `action` about the correct program `code`."""
    broken = code.rstrip() + "\n\nthis line is not Python  # planted by the scripted replay\n"
    if action == "solution":
        return Reply(fenced(code, "The program below follows the task's Model exactly."), finish_reason="stop")
    if action == "compile_error":
        return Reply(fenced(broken, "Here is a first version."), finish_reason="stop")
    if action == "no_code":
        return Reply("I would fuse the operations into one kernel and tile the inner loop.", finish_reason="stop")
    if action == "truncated":
        return Reply("Here is the program.\n\n```python\n" + code[: len(code) // 2], finish_reason="length")
    if action == "conflict":
        return Reply(fenced(broken, "A first attempt:") + "\n" + fenced(code, "A corrected version:"),
                     finish_reason="stop")
    if action == "think":
        return Reply("<think>Match the reference, then launch one kernel per row.</think>\n" + fenced(code),
                     finish_reason="stop")
    raise BadInputError(f"unknown script action {action!r}", hint=f"actions: {', '.join(SCRIPT_ACTIONS)}")


def solutions_from(tasks: Iterable[Any], language: str, samples_file: str | Path | None = None) -> Callable[[str], str | None]:
    """The correct program per task for `ScriptedReplay`: the first program of each task in
    `samples_file` when given, else the task's reference solution in `language`."""
    by_id = {t.id: t for t in tasks}
    if samples_file is not None:
        stored = StoredReplay.from_path(samples_file)
        table = {tid: _program_of(runs[0][0], language, by_id.get(tid)) for tid, runs in stored.runs.items()
                 if runs and runs[0]}
        return table.get
    cache: dict[str, str | None] = {}

    def lookup(task_id: str) -> str | None:
        if task_id not in cache:
            task = by_id.get(task_id)
            cache[task_id] = reference_solution(task, language) if task is not None else None
        return cache[task_id]
    return lookup


def _program_of(reply: Reply, language: str, task: Any = None) -> str | None:
    """The program in a stored reply, extracted as the agents extract it (a kernel-file task's reply
    is kernel code defining the names its tests call, not a ModelNew program)."""
    from amdkv.prompts.benchmark import kernel_api_names
    from amdkv.prompts.extract import extract_code

    ex = extract_code(reply.content, language, api_names=kernel_api_names(task) if task is not None else None)
    return ex.code if ex.ok else None


def reference_solution(task: Any, language: str) -> str | None:
    """The task's reference solution text in `language`, or None."""
    try:  # procedural suites name their solutions in METADATA (amdkv.tasks.solutions, branch procedural)
        from amdkv.tasks.solutions import solution_for
    except ImportError:  # until it lands: bundled tasks only
        from amdkv.tasks.builtin import solution_path

        path = solution_path(task.id, language)
    else:
        path = solution_for(task, language)
    return path.read_text(encoding="utf-8") if path is not None else None
