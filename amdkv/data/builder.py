"""Records -> the rows of every config of one dataset, by a stated `BuildPolicy`.

    plan = Builder(RecordStore("runs/triton"), dataset_spec("triton"), BuildPolicy()).plan()
    plan.report                       # what every phase removed, rows per config and split
    for row in plan.rows("torch2triton", "train"): ...

Phases (each with a progress bar and a line in the report):

1. **scan**: read every record once (in `workers` processes for large stores), verify it
   (schema version, content hash), and keep per unit only what the later phases need (ids,
   task, platform, status, speedup, an exact key and a MinHash signature of its text, where it
   is in the store). A unit is one potential row: a sample record, one turn of a trajectory (its
   program), a trajectory, a QA record. Memory stays small: rows are built later by reading the
   records again at their stored offsets.
2. **scope**: units of another language or record kind than the dataset's.
3. **policy**: selection, platforms, trajectories, grounded QA (`BuildPolicy`).
4. **decontaminate**: against the eval suites (`amdkv.data.decontam`).
5. **exact** then **near duplicates**: kernels of the same task (exact key, then MinHash LSH at
   `near_threshold`), trajectories (same task and turns), QA (question and answer). The kept one
   of each group: GPU-verified first, then the highest speedup, then the smallest id.
6. **pairs**: optimisation pairs (policy `pairs`, `min_gain`).
7. **split**: clusters = connected components over tasks (same task id; task sources at
   Jaccard >= `task_cluster_threshold`; kernels of different tasks that are near duplicates) and
   QA files; each cluster goes to one split by a seeded hash of its key (`amdkv.tasks.split.bucket`),
   so no task and no near-duplicate cluster is in two splits, in any config of the dataset.

Deterministic: the same records and policy give the same rows in the same order (rows are
ordered by a seeded hash of their id), whatever the shard names or the order of appends.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from amdkv.data import rows as row_builders
from amdkv.data.policy import BuildPolicy
from amdkv.data.records import ROCM_QA, SAMPLE, TRAJECTORY, content_hash, is_gpu_platform
from amdkv.data.schemas import OPTIMISATION, ROCM_QA as QA_KIND, TRAJECTORIES, TRANSLATION, DatasetSpec, features
from amdkv.data.similarity import NUM_PERM, SEED, NeighbourIndex, Signer
from amdkv.data.store import Chunk, Location, ReadReport, RecordStore, iter_chunk
from amdkv.errors import BadInputError
from amdkv.process import forked_worker_signals

# unit kinds
U_SAMPLE, U_TURN, U_TRAJECTORY, U_QA = "sample", "turn", "trajectory", "qa"


def _duplicate_label(kept: "Unit") -> str:
    """The report's label for units removed as duplicates of `kept`: samples and trajectory turns
    share one scope (a kernel of a task, however it was generated), trajectories and QA pairs their own."""
    return {U_SAMPLE: "kernel of the same task", U_TURN: "kernel of the same task",
            U_TRAJECTORY: "trajectory of the same task", U_QA: "qa pair"}[kept.kind]


@dataclasses.dataclass(slots=True)
class Unit:
    kind: str
    location: Location
    record_id: str
    uid: str
    turn: int | None = None
    task_key: str | None = None      # "<task id>@<source hash>"
    task_id: str | None = None
    task_suite: str | None = None
    language: str | None = None
    platform: str | None = None
    status: str | None = None
    speedup: float | None = None
    interpreter_verified: bool = False
    stage: str | None = None         # a turn's prompt stage
    parent: str | None = None        # uid of the slower program this one improves (optimisation link)
    exact: str | None = None
    group: str | None = None         # QA: "library/file"
    licence: str | None = None
    removed: str | None = None       # the filter that removed it (None: kept)

    @property
    def gpu_ok(self) -> bool:
        return self.status == "ok" and is_gpu_platform(self.platform)

    def rank(self) -> tuple:
        """Which copy of a duplicate group is kept: GPU-verified, fastest, smallest id."""
        return (not self.gpu_ok, -(self.speedup or 0.0), self.uid)


@dataclasses.dataclass
class PhaseReport:
    name: str
    removed: int = 0
    detail: dict[str, int] = dataclasses.field(default_factory=dict)

    def count(self, reason: str, n: int = 1) -> None:
        self.removed += n
        self.detail[reason] = self.detail.get(reason, 0) + n


@dataclasses.dataclass
class BuildReport:
    dataset: str
    policy: dict[str, Any]
    records: int = 0
    records_by_kind: dict[str, int] = dataclasses.field(default_factory=dict)
    duplicate_records: int = 0
    torn_tails: list[str] = dataclasses.field(default_factory=list)
    units_in: dict[str, int] = dataclasses.field(default_factory=dict)
    phases: list[PhaseReport] = dataclasses.field(default_factory=list)
    pairs: dict[str, int] = dataclasses.field(default_factory=dict)
    clusters: dict[str, Any] = dataclasses.field(default_factory=dict)
    decontamination: dict[str, Any] = dataclasses.field(default_factory=dict)
    rows: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    peak_rss_mib: dict[str, float] = dataclasses.field(default_factory=dict)  # this process, after each phase

    def phase(self, name: str) -> PhaseReport:
        found = next((p for p in self.phases if p.name == name), None)
        if found is None:
            found = PhaseReport(name)
            self.phases.append(found)
        return found

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class PairRef:
    uid: str
    before: int
    after: int
    source: str      # "parent" | "task"


@dataclasses.dataclass
class Plan:
    """What a build will write: per config and split, the units (or pairs) in row order."""

    spec: DatasetSpec
    policy: BuildPolicy
    store: RecordStore
    units: list[Unit]
    tasks: dict[str, dict[str, Any]]
    cluster_of: dict[str, str]                       # cluster atom -> cluster key
    split_of: dict[str, str]                         # cluster key -> split
    entries: dict[str, dict[str, list[Any]]]         # config -> split -> [unit index | PairRef]
    report: BuildReport
    workers: int = 0                                 # row-building processes while writing

    def configs(self) -> list[str]:
        """Configs with at least one row, default first."""
        return [c for c in self.spec.configs if any(self.entries.get(c, {}).values())]

    def splits(self, config: str) -> list[str]:
        return [s for s, _ in self.policy.splits if self.entries.get(config, {}).get(s)]

    def features(self, config: str) -> Any:
        return features(self.spec.kind(config))

    def fingerprint(self, config: str, split: str) -> str:
        """What the rows of (config, split) are made of: their ids in order, the policy, the
        schema and prompt versions and the amdkv version (for `Dataset.from_generator`)."""
        import amdkv
        from amdkv.prompts.templates import PROMPT_VERSION

        h = hashlib.sha256()
        h.update(repr((self.spec.name, config, split, self.policy.to_dict(), amdkv.__version__, PROMPT_VERSION,
                       self.spec.kind(config))).encode())
        for entry in self.entries[config][split]:
            h.update((entry.uid if isinstance(entry, PairRef) else self.units[entry].uid).encode())
        return h.hexdigest()[:32]

    def cluster_for_task(self, task_id: str) -> str:
        return self.cluster_of[f"task:{task_id}"]

    def rows(self, config: str, split: str, *, workers: int = 0) -> Iterator[dict[str, Any]]:
        """The rows of (config, split) in order, built from the records (see amdkv.data.rows).

        `workers` > 0: built by that many forked processes (they inherit the plan; rows come back
        in order, chunk by chunk) while this process consumes them: building a row (reading its
        record, prompts, JSON) costs about twice what `datasets` then spends encoding and writing
        it, so the two overlap on two cores."""
        entries = self.entries[config][split]
        if workers <= 0 or len(entries) < 2 * ROW_CHUNK:
            yield from _build_rows(self, config, entries)
            return
        import multiprocessing

        global _FORKED_PLAN
        _FORKED_PLAN = self
        chunks = [(config, entries[i:i + ROW_CHUNK]) for i in range(0, len(entries), ROW_CHUNK)]
        window = _ChunkWindow(ROW_CHUNKS_AHEAD_PER_WORKER * workers)
        try:
            with multiprocessing.get_context("fork").Pool(workers, initializer=forked_worker_signals) as pool:
                for chunk in pool.imap(_rows_of_chunk, window.feed(chunks)):
                    yield from chunk
                    window.done()
        finally:
            window.stop()
            _FORKED_PLAN = None

    def _row(self, kind: str, entry: Any, reader: "_RecordReader", messages: row_builders.MessageBuilder) -> dict:
        if kind == OPTIMISATION:
            before, after = self.units[entry.before], self.units[entry.after]
            return row_builders.optimisation_row(
                (reader.read(before.location), before.turn), (reader.read(after.location), after.turn),
                uid=entry.uid, before_id=before.uid, after_id=after.uid, pair_source=entry.source,
                cluster=self.cluster_for_task(after.task_id), messages=messages)
        unit = self.units[entry]
        record = reader.read(unit.location)
        if kind == TRANSLATION:
            return row_builders.translation_row(record, uid=unit.uid, cluster=self.cluster_for_task(unit.task_id),
                                                messages=messages, turn=unit.turn)
        if kind == TRAJECTORIES:
            return row_builders.trajectory_row(record, uid=unit.uid, cluster=self.cluster_for_task(unit.task_id))
        return row_builders.qa_row(record, uid=unit.uid, cluster=self.cluster_of[f"qa:{unit.group}"])


ROW_CHUNK = 256           # rows per message between a row-building process and the writer
# Chunks built ahead of the writer, per row-building process. `Pool.imap` alone has no back-pressure:
# its feeder hands out every chunk at once and finished chunks pile up in the parent while `datasets`
# writes (about half as fast as two processes build): the 100k-record build peaked at 2.02 GiB in
# its largest process while writing, against 0.59 GiB after planning (docs/data.md, Measured).
ROW_CHUNKS_AHEAD_PER_WORKER = 2


class _ChunkWindow:
    """Lets `Pool.imap`'s feeder take a chunk only while fewer than `size` chunks are built or being
    built and not yet written. `stop()` frees a feeder still waiting (a consumer that stopped
    early), so the pool can shut down."""

    def __init__(self, size: int) -> None:
        import threading

        self._slots = threading.Semaphore(size)
        self._stopped = threading.Event()

    def feed(self, chunks: list[Any]) -> Iterator[Any]:
        for chunk in chunks:
            while not self._slots.acquire(timeout=0.1):
                if self._stopped.is_set():
                    return
            if self._stopped.is_set():
                return
            yield chunk

    def done(self) -> None:
        self._slots.release()

    def stop(self) -> None:
        self._stopped.set()
_FORKED_PLAN: "Plan | None" = None   # the plan row-building processes inherit when forked


def _build_rows(plan: Plan, config: str, entries: list[Any]) -> Iterator[dict[str, Any]]:
    kind = plan.spec.kind(config)
    reader = _RecordReader(plan.store)
    messages = _row_messages()
    try:
        for entry in entries:
            yield plan._row(kind, entry, reader, messages)
    finally:
        reader.close()


@functools.lru_cache(maxsize=1)
def _row_messages() -> row_builders.MessageBuilder:
    """One message cache per process, kept across splits and configs (the same tasks recur)."""
    return row_builders.MessageBuilder()


def _rows_of_chunk(job: tuple[str, list[Any]]) -> list[dict[str, Any]]:
    config, entries = job
    return list(_build_rows(_FORKED_PLAN, config, entries))


class _RecordReader:
    """Reads records at stored locations with open shard files and a small cache (the turns of
    one trajectory are consecutive in row order only by chance; a cache of recent records keeps
    rereads cheap)."""

    def __init__(self, store: RecordStore, cache: int = 256) -> None:
        self._paths = store.shard_paths()
        self._files: dict[int, Any] = {}
        self._cache: collections.OrderedDict[Location, dict] = collections.OrderedDict()
        self._cache_size = cache

    def read(self, location: Location) -> dict[str, Any]:
        import json

        hit = self._cache.get(location)
        if hit is not None:
            self._cache.move_to_end(location)
            return hit
        fh = self._files.get(location.shard)
        if fh is None:
            fh = self._files[location.shard] = open(self._paths[location.shard], "rb")
        fh.seek(location.offset)
        record = json.loads(fh.read(location.length))
        self._cache[location] = record
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return record

    def close(self) -> None:
        for fh in self._files.values():
            fh.close()
        self._files.clear()


# ---------------------------------------------------------------------------------- scanning
@functools.lru_cache(maxsize=1)
def _signer() -> Signer:
    return Signer(NUM_PERM, SEED)


def _scan_chunk(chunk: Chunk, policy: BuildPolicy, language: str | None) -> tuple[list[Unit], list, dict, ReadReport]:
    """Units, their signatures and the task parts of one chunk (runs in worker processes).

    Every program gets its exact key (cheap); the MinHash signature (most of the scan's cost) only
    where a later phase can use it: samples that the policy selects, every turn of a trajectory
    (decontamination looks at all of them) and QA pairs."""
    import warnings

    from amdkv.data.similarity import exact_key, normalize

    signer = _signer()
    units: list[Unit] = []
    sigs: list[np.ndarray | None] = []
    tasks: dict[str, dict] = {}
    report = ReadReport()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torn tails are counted in the report
        for location, record in iter_chunk(chunk, report=report):
            report.records += 1
            for unit, text in _units_of(record, location, tasks):
                units.append(unit)
                if text is None:
                    sigs.append(None)
                elif unit.kind != U_SAMPLE or (unit.language == language and select_reason(unit, policy) is None):
                    unit.exact, sig = signer.fingerprint(text)
                    sigs.append(sig)
                else:
                    unit.exact = exact_key(normalize(text), normalized=True)
                    sigs.append(None)
    return units, sigs, tasks, report


def select_reason(u: Unit, p: BuildPolicy) -> str | None:
    """Why the policy's selection drops a program (None: selected)."""
    if p.platforms is not None and u.platform not in p.platforms:
        return f"platform {u.platform}"
    if u.status == "infra_error":
        return "infra_error (harness failure, not judged)"
    if p.select == "all":
        return None
    if u.status != "ok":
        return f"status {u.status}"
    if p.select == "faster" and (u.speedup is None or u.speedup < p.min_speedup):
        return "no GPU speedup" if u.speedup is None else f"speedup < {p.min_speedup}"
    return None


def _units_of(record: dict, location: Location, tasks: dict[str, dict]) -> Iterator[tuple[Unit, str | None]]:
    rid, kind = record["id"], record["kind"]
    task = record.get("task")
    common: dict[str, Any] = {"location": location, "record_id": rid, "licence": record.get("licence")}
    if task is not None:
        key = f"{task['id']}@{task['source_hash']}"
        tasks.setdefault(key, task)
        common.update(task_key=key, task_id=task["id"], task_suite=task.get("suite"))
    if kind == SAMPLE:
        verdict, candidate = record["verdict"], record["candidate"]
        parent = (record.get("origin") or {}).get("parent")
        yield Unit(kind=U_SAMPLE, uid=rid, language=candidate.get("language"), platform=verdict.get("platform"),
                   status=verdict.get("status"), speedup=_speedup(verdict),
                   interpreter_verified=bool(verdict.get("interpreter_verified")),
                   parent=parent if isinstance(parent, str) else None, **common), candidate["source"]
    elif kind == TRAJECTORY:
        traj = record["trajectory"]
        language = traj.get("language")
        steps = traj.get("turns") or []
        last_ok: str | None = None
        for k, step in enumerate(steps):
            verdict = step.get("verdict")
            if step.get("code") is None or not verdict:
                continue
            uid = content_hash({"record": rid, "turn": k})
            yield Unit(kind=U_TURN, uid=uid, turn=k, language=language, platform=verdict.get("platform"),
                       status=verdict.get("status"), speedup=_speedup(verdict), stage=step.get("stage"),
                       interpreter_verified=bool(verdict.get("interpreter_verified")),
                       parent=last_ok if step.get("stage") == "optimise" else None, **common), step["code"]
            if verdict.get("status") == "ok":
                last_ok = uid
        statuses = [(s.get("verdict") or {}).get("status") for s in steps]
        platforms = {(s.get("verdict") or {}).get("platform") for s in steps if s.get("verdict")}
        unit = Unit(kind=U_TRAJECTORY, uid=rid, language=language, status="ok" if "ok" in statuses else None,
                    platform=platforms.pop() if len(platforms) == 1 else None, **common)
        unit.exact = content_hash([task["id"] if task else None,
                                   [[s.get("reply"), s.get("code")] for s in steps]])[:32]
        yield unit, None
    elif kind == ROCM_QA:
        qa = record["qa"]
        grounded = bool((qa.get("grounding") or {}).get("grounded"))
        yield Unit(kind=U_QA, uid=rid, group=f"{qa['library']}/{qa['file']}", status="ok" if grounded else None,
                   **common), qa["question"] + "\n" + qa["answer"]


def _speedup(verdict: dict) -> float | None:
    s = verdict.get("speedup")
    return float(s) if isinstance(s, (int, float)) and s > 0 and s == s and s != float("inf") else None


# ---------------------------------------------------------------------------------- builder
class Builder:
    """Plans a build (see the module docstring); `amdkv.data.hub_layout.write_plan` writes it."""

    def __init__(self, store: RecordStore, spec: DatasetSpec, policy: BuildPolicy | None = None, *,
                 eval_tasks: Iterable[Any] = (), workers: int | None = None, progress: bool = True) -> None:
        self.store, self.spec = store, spec
        self.policy = policy or BuildPolicy()
        self.eval_tasks = list(eval_tasks)
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self.progress = progress
        if self.policy.configs:
            for config in self.policy.configs:
                spec.kind(config)  # raises for a config the dataset does not have
        self.report = BuildReport(dataset=spec.name, policy=self.policy.to_dict())

    # -------------------------------------------------------------- helpers
    def _bar(self, total: int | None, desc: str, unit: str = "unit"):
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit=unit, disable=not self.progress, file=sys.stderr,
                    unit_scale=unit == "B", leave=True)

    def _timed(self, name: str) -> "_Timer":
        return _Timer(self.report, name)

    def _remove(self, units: Iterable[Unit], phase: str, reason: str) -> None:
        report = self.report.phase(phase)
        for unit in units:
            if unit.removed is None:
                unit.removed = f"{phase}:{reason}"
                report.count(reason)

    # -------------------------------------------------------------- phases
    def plan(self) -> Plan:
        with self._timed("scan"):
            units, sigs, tasks = self._scan()
        self.signatures = {i: s for i, s in enumerate(sigs) if s is not None}
        self.units, self.tasks = units, tasks
        with self._timed("policy"):
            self._scope_and_policy()
        with self._timed("decontaminate"):
            self._decontaminate()
        with self._timed("deduplicate"):
            cross_task = self._deduplicate()
        with self._timed("pairs"):
            pairs = self._pairs() if self._wants(OPTIMISATION) else []
        with self._timed("split"):
            cluster_of, split_of = self._clusters(cross_task, pairs)
            entries = self._entries(pairs, cluster_of, split_of)
        self.signatures.clear()  # only the plan phases use them
        return Plan(self.spec, self.policy, self.store, units, tasks, cluster_of, split_of, entries, self.report,
                    self.workers)

    def _wants(self, kind: str) -> bool:
        configs = self.policy.configs or self.spec.configs
        return any(self.spec.kind(c) == kind for c in configs)

    def _scan(self) -> tuple[list[Unit], list[np.ndarray | None], dict[str, dict]]:
        chunks = self.store.chunks()
        total = sum(c.end - c.start for c in chunks)
        units: list[Unit] = []
        sigs: list[np.ndarray | None] = []
        tasks: dict[str, dict] = {}
        owner: dict[str, int] = {}
        bar = self._bar(total, "scan records", "B")
        try:
            scan = functools.partial(_scan_chunk, policy=self.policy, language=self.spec.language)
            for n, (chunk, (c_units, c_sigs, c_tasks, report)) in enumerate(zip(chunks, self._map(scan, chunks))):
                bar.update(chunk.end - chunk.start)
                self.report.torn_tails += report.torn_tails
                for unit, sig in zip(c_units, c_sigs):
                    first = owner.setdefault(unit.record_id, n)
                    if first != n:  # a second copy of a record written concurrently elsewhere
                        continue
                    units.append(unit)
                    sigs.append(sig)
                tasks.update({k: v for k, v in c_tasks.items() if k not in tasks})
        finally:
            bar.close()
        kinds = collections.Counter()
        for u in units:
            if u.kind != U_TURN:
                kinds[{U_SAMPLE: SAMPLE, U_TRAJECTORY: TRAJECTORY, U_QA: ROCM_QA}[u.kind]] += 1
        self.report.records = sum(kinds.values())
        self.report.records_by_kind = dict(kinds)
        self.report.units_in = dict(collections.Counter(u.kind for u in units))
        # deterministic order whatever the shard names: by unit id
        order = sorted(range(len(units)), key=lambda i: units[i].uid)
        return [units[i] for i in order], [sigs[i] for i in order], tasks

    def _map(self, func: Callable, chunks: list[Chunk]) -> Iterator:
        if self.workers <= 1 or len(chunks) <= 1:
            return map(func, chunks)
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(chunks)), initializer=forked_worker_signals)
        results = pool.map(func, chunks)

        def drain() -> Iterator:
            try:
                yield from results
            finally:
                pool.shutdown(cancel_futures=True)
        return drain()

    def _scope_and_policy(self) -> None:
        p, spec = self.policy, self.spec
        wanted_kinds = {U_QA} if spec.language is None else {U_SAMPLE, U_TURN, U_TRAJECTORY}
        for u in self.units:
            if u.kind not in wanted_kinds:
                self._remove([u], "scope", f"{u.kind} record")
            elif spec.language is not None and u.language != spec.language:
                self._remove([u], "scope", f"language {u.language}")
        live = [u for u in self.units if u.removed is None]
        self._check_platforms(live)
        for u in live:
            if u.kind in (U_SAMPLE, U_TURN):
                reason = select_reason(u, p)
                if reason is None and u.kind == U_TURN and not p.expand_trajectories:
                    reason = "trajectory turns not expanded"
                if reason:
                    self._remove([u], "policy", reason)
            elif u.kind == U_TRAJECTORY:
                if p.platforms is not None and u.platform is not None and u.platform not in p.platforms:
                    self._remove([u], "policy", f"platform {u.platform}")
                elif p.trajectories == "correct" and u.status != "ok":
                    self._remove([u], "policy", "trajectory without a correct turn")
            elif u.kind == U_QA and p.qa_grounded_only and u.status != "ok":
                self._remove([u], "policy", "answer not grounded")

    def _check_platforms(self, units: list[Unit]) -> None:
        if self.policy.platforms is not None:
            return
        gpus = sorted({u.platform for u in units if is_gpu_platform(u.platform)})
        if len(gpus) > 1:
            raise BadInputError(f"the records hold verdicts from several GPU platforms ({', '.join(gpus)}): "
                                "NVIDIA and AMD evidence is never merged silently",
                                hint=f"pass --platforms {','.join(gpus)} to keep both (every row names its platform), "
                                     "or one of them")

    def _decontaminate(self) -> None:
        from amdkv.data.decontam import PASSED_IN, Decontaminator, eval_texts

        p = self.policy
        texts = eval_texts(p.decontaminate, self.eval_tasks)
        dec = Decontaminator(texts, _signer(), task_threshold=p.decontam_task_threshold,
                             text_threshold=p.decontam_text_threshold)
        phase = self.report.phase("decontaminate")
        by_suite: collections.Counter = collections.Counter()
        task_hits: dict[str, Any] = {}
        self.task_signatures: dict[str, np.ndarray] = {}
        signer = _signer()
        for key, part in self.tasks.items():
            exact, self.task_signatures[key] = signer.fingerprint(part["source"])
            task_hits[key] = dec.match_task(part.get("suite"), part["id"], exact, self.task_signatures[key])
        turn_hits: dict[str, Any] = {}
        live = [i for i, u in enumerate(self.units) if u.removed is None or u.kind == U_TURN]
        bar = self._bar(len(live), "decontaminate")
        for i in live:
            u = self.units[i]
            bar.update(1)
            hit = task_hits.get(u.task_key) if u.task_key else None
            if hit is None and i in self.signatures:
                hit = dec.match_text(u.exact, self.signatures[i])
            if u.kind == U_TURN and hit is not None:
                turn_hits.setdefault(u.record_id, hit)
            if hit is not None and u.removed is None:
                self._remove([u], "decontaminate", hit[0])
                by_suite[hit[1].suite] += 1
        bar.close()
        for u in self.units:  # a trajectory is contaminated when any of its programs is
            if u.kind == U_TRAJECTORY and u.removed is None and u.record_id in turn_hits:
                self._remove([u], "decontaminate", turn_hits[u.record_id][0])
                by_suite[turn_hits[u.record_id][1].suite] += 1
        self.report.decontamination = {
            "suites": list(p.decontaminate) + ([PASSED_IN] if self.eval_tasks else []),
            "eval_texts": len(texts), "eval_tasks": len({(t.suite, t.task_id) for t in texts}),
            "task_threshold": p.decontam_task_threshold, "text_threshold": p.decontam_text_threshold,
            "removed": phase.removed, "by_reason": dict(phase.detail), "by_suite": dict(by_suite)}

    def _deduplicate(self) -> list[tuple[int, int]]:
        """Exact then near duplicates; returns the near pairs between kernels of different tasks
        (for the split's clusters)."""
        groups: dict[tuple, list[Unit]] = collections.defaultdict(list)
        for u in self.units:
            if u.removed is None:
                scope = (u.kind if u.kind != U_TURN else U_SAMPLE, u.task_id if u.kind != U_QA else None, u.exact)
                groups[scope].append(u)
        for members in groups.values():
            if len(members) > 1:
                members.sort(key=Unit.rank)
                self._remove(members[1:], "exact duplicates", _duplicate_label(members[0]))
        near_units = [i for i, u in enumerate(self.units)
                      if u.removed is None and u.kind in (U_SAMPLE, U_TURN, U_QA) and i in self.signatures]
        index = NeighbourIndex(_signer(), self.policy.near_threshold)
        bar = self._bar(len(near_units) * 2, "near duplicates (MinHash LSH)")
        for i in near_units:
            index.add(i, self.signatures[i])
            bar.update(1)
        same, cross = [], []
        for i in near_units:
            for j in index.query(self.signatures[i]):
                if j > i:
                    a, b = self.units[i], self.units[j]
                    (same if (a.task_id == b.task_id and a.kind != U_QA) or (a.kind == b.kind == U_QA) else cross).append((i, j))
            bar.update(1)
        bar.close()
        from amdkv.tasks.split import cluster_indices

        positions = {unit_index: k for k, unit_index in enumerate(near_units)}
        for group in cluster_indices(len(near_units), [(positions[i], positions[j]) for i, j in same]):
            if len(group) > 1:
                members = sorted((self.units[near_units[k]] for k in group), key=Unit.rank)
                self._remove(members[1:], "near duplicates", _duplicate_label(members[0]))
        return cross

    def _pairs(self) -> list[PairRef]:
        """Optimisation pairs (see BuildPolicy). Candidates: correct kernels with a GPU speedup
        that no scope, policy-platform or decontamination filter removed (a kernel dropped as a
        duplicate or as slower than eager can still be the `before` of a pair)."""
        p = self.policy
        if p.pairs == "none":
            return []

        def eligible(u: Unit) -> bool:
            blocked = u.removed is not None and (u.removed.startswith(("scope:", "decontaminate:"))
                                                 or u.removed.startswith("policy:platform"))
            return (u.kind in (U_SAMPLE, U_TURN) and not blocked and u.status == "ok" and u.speedup is not None
                    and is_gpu_platform(u.platform))

        ok = {u.uid: i for i, u in enumerate(self.units) if eligible(u)}
        found: dict[tuple[str | None, str | None], PairRef] = {}
        counts = collections.Counter()

        def add(bi: int, ai: int, source: str) -> None:
            b, a = self.units[bi], self.units[ai]
            if b.platform != a.platform or b.task_id != a.task_id or b.exact == a.exact:
                return
            if a.speedup / b.speedup < p.min_gain:
                return
            key = (b.exact, a.exact)
            if key not in found:
                found[key] = PairRef(content_hash({"before": b.uid, "after": a.uid})[:64], bi, ai, source)
                counts[source] += 1

        if p.pairs in ("parent", "both"):
            for uid, ai in ok.items():
                parent = self.units[ai].parent
                if parent in ok:
                    add(ok[parent], ai, "parent")
        if p.pairs in ("task", "both"):
            by_task: dict[tuple, list[int]] = collections.defaultdict(list)
            for uid, i in ok.items():
                u = self.units[i]
                if u.removed is None or u.removed.startswith("policy:"):
                    by_task[(u.task_id, u.platform)].append(i)
            for members in by_task.values():
                members.sort(key=lambda i: self.units[i].rank())
                fastest = members[0]
                gains = sorted(members[1:], key=lambda i: (self.units[i].speedup, self.units[i].uid))
                for bi in gains[:p.max_pairs_per_task]:
                    add(bi, fastest, "task")
        self.report.pairs = {"found": len(found), **dict(counts), "min_gain": p.min_gain}
        return sorted(found.values(), key=lambda r: r.uid)

    def _clusters(self, cross: list[tuple[int, int]], pairs: list[PairRef]) -> tuple[dict[str, str], dict[str, str]]:
        from amdkv.tasks.split import bucket, cluster_indices

        kept = [u for u in self.units if u.removed is None]
        atoms: list[str] = sorted({f"task:{u.task_id}" for u in kept if u.task_id is not None}
                                  | {f"task:{self.units[r.after].task_id}" for r in pairs}
                                  | {f"qa:{u.group}" for u in kept if u.kind == U_QA})
        position = {a: k for k, a in enumerate(atoms)}
        edges: list[tuple[int, int]] = []
        # tasks whose sources are near copies (any source the task id had)
        task_keys = sorted({u.task_key for u in kept if u.task_key} | {self.units[r.after].task_key for r in pairs})
        index = NeighbourIndex(_signer(), self.policy.task_cluster_threshold)
        for k, key in enumerate(task_keys):
            index.add(k, self.task_signatures[key])
        task_pairs = list(index.pairs())
        for a, b in task_pairs:
            edges.append((position[f"task:{self.tasks[task_keys[a]]['id']}"],
                          position[f"task:{self.tasks[task_keys[b]]['id']}"]))
        for i, j in cross:
            ui, uj = self.units[i], self.units[j]
            ai = f"qa:{ui.group}" if ui.kind == U_QA else f"task:{ui.task_id}"
            aj = f"qa:{uj.group}" if uj.kind == U_QA else f"task:{uj.task_id}"
            if ai in position and aj in position:
                edges.append((position[ai], position[aj]))
        cluster_of: dict[str, str] = {}
        split_of: dict[str, str] = {}
        sizes = []
        for group in cluster_indices(len(atoms), edges):
            key = atoms[group[0]]
            split_of[key] = bucket(key, self.policy.splits, seed=str(self.policy.seed))
            sizes.append(len(group))
            for k in group:
                cluster_of[atoms[k]] = key
        self.report.clusters = {"clusters": len(sizes), "atoms": len(atoms), "largest": max(sizes, default=0),
                                "near_task_pairs": len(task_pairs), "near_kernel_pairs_across_tasks": len(cross),
                                "clusters_per_split": dict(collections.Counter(split_of.values()))}
        return cluster_of, split_of

    def _entries(self, pairs: list[PairRef], cluster_of: dict[str, str],
                 split_of: dict[str, str]) -> dict[str, dict[str, list[Any]]]:
        configs = self.policy.configs or self.spec.configs
        entries: dict[str, dict[str, list[Any]]] = {c: {s: [] for s, _ in self.policy.splits} for c in configs}
        kinds = {c: self.spec.kind(c) for c in configs}
        seed = str(self.policy.seed)

        def split_for(u: Unit) -> str:
            atom = f"qa:{u.group}" if u.kind == U_QA else f"task:{u.task_id}"
            return split_of[cluster_of[atom]]

        for i, u in enumerate(self.units):
            if u.removed is not None:
                continue
            kind = {U_SAMPLE: TRANSLATION, U_TURN: TRANSLATION, U_TRAJECTORY: TRAJECTORIES, U_QA: QA_KIND}[u.kind]
            for config, config_kind in kinds.items():
                if config_kind == kind:
                    entries[config][split_for(u)].append(i)
        for ref in pairs:
            for config, config_kind in kinds.items():
                if config_kind == OPTIMISATION:
                    entries[config][split_for(self.units[ref.after])].append(ref)

        def order(entry: Any) -> str:
            uid = entry.uid if isinstance(entry, PairRef) else self.units[entry].uid
            return hashlib.sha256(f"{seed}:{uid}".encode()).hexdigest()

        for config in entries:
            for split in entries[config]:
                entries[config][split].sort(key=order)
        self.report.rows = {c: {s: len(v) for s, v in by_split.items()} for c, by_split in entries.items()}
        return entries


class _Timer:
    """Adds a phase's seconds, and the process's peak RSS so far, to the report."""

    def __init__(self, report: BuildReport, name: str) -> None:
        self.report, self.name = report, name

    def __enter__(self) -> "_Timer":
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.report.seconds[self.name] = round(self.report.seconds.get(self.name, 0.0)
                                               + time.perf_counter() - self.start, 3)
        self.report.peak_rss_mib[self.name] = peak_rss_mib()


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (getrusage; the scan's worker processes apart)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
