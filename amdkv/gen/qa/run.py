"""`amdkv gen rocm-qa`: grounded question-answer pairs from local ROCm library source trees.

    trees -> chunks (functions, classes; file, lines, commit) -> one request per chunk ->
    pairs parsed -> grounded? (cited lines exist and hold the names the answer uses) ->
    deduplicated -> `rocm_qa` records

The run folder is the kernel runs' (amdkv/gen/rundir.py: manifest, records/, requests/,
summary.json) plus `qa-progress.jsonl`: one line per chunk finished, with its counts, written
after the chunk's pairs (and `qa-dropped.jsonl`: every dropped pair with its reason); a re-run skips those chunks (and gets the replies of chunks in progress
from the request cache). `--chunks-only` counts chunks without asking a model.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

from amdkv.data.records import ROCM_QA, Record
from amdkv.data.store import RecordStore
from amdkv.errors import BadInputError, EXIT_BAD_INPUT, EXIT_INFRA, EXIT_OK
from amdkv.gen.llm import ClientConfigError, SamplingParams
from amdkv.gen.qa.chunker import DEFAULT_MAX_LINES, Chunk, chunk_file, iter_source_files
from amdkv.gen.qa.grounding import DEFAULT_MAX_SPAN, SourceTree, check_pair, open_tree
from amdkv.gen.qa.pairs import QA_GEN_PROMPT_VERSION, Deduplicator, parse_pairs, qa_request
from amdkv.gen.retry import RetryPolicy
from amdkv.gen.rundir import open_manifest, write_json
from amdkv.reports.jsonl import JsonlAppender

PROGRESS = "qa-progress.jsonl"
DROPPED = "qa-dropped.jsonl"
QA_LLM_KINDS = ("openai", "hf", "replay")


@dataclasses.dataclass(frozen=True)
class QASettings:
    """`sources`: tree roots; `libraries`: a name per source (default: the Debian source name or
    the folder's). `max_chunks`: per tree, spread evenly over its chunks. `llm=replay` is the
    scripted QA model (amdkv/gen/qa/scripted.py)."""

    sources: tuple[str, ...]
    out: str
    libraries: tuple[str, ...] = ()
    llm: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    params: SamplingParams = dataclasses.field(default_factory=lambda: SamplingParams(temperature=0.3,
                                                                                     max_tokens=2048))
    pairs_per_chunk: int = 3
    max_chunks: int | None = None
    max_lines: int = DEFAULT_MAX_LINES
    max_span: int = DEFAULT_MAX_SPAN
    concurrency: int = 8
    max_llm_failures: int = 3
    request_cache: str | None = None
    request_timeout: float = 600.0
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    licence: str | None = None
    chunks_only: bool = False

    def __post_init__(self) -> None:
        if not self.sources:
            raise BadInputError("no --source given", hint="pass --source PATH (a library's source tree), repeatable")
        if self.libraries and len(self.libraries) != len(self.sources):
            raise BadInputError(f"{len(self.libraries)} --library names for {len(self.sources)} --source trees",
                                hint="give one --library per --source, in the same order, or none")
        if self.llm not in QA_LLM_KINDS:
            raise BadInputError(f"unknown --llm {self.llm!r}", hint=f"use one of {', '.join(QA_LLM_KINDS)}")
        if not self.chunks_only and self.llm == "openai" and (not self.model or not self.base_url):
            raise BadInputError("--llm openai needs --model and --base-url", hint="or --llm replay, or --chunks-only")

    @property
    def model_name(self) -> str:
        return self.model or "scripted-qa"


@dataclasses.dataclass
class QAOutcome:
    summary: dict[str, Any]
    exit_code: int
    error: BaseException | None = None


def collect_chunks(tree: SourceTree, max_lines: int = DEFAULT_MAX_LINES) -> tuple[list[Chunk], int]:
    """Every chunk of a tree (file order) and the number of source files read."""
    chunks, files = [], 0
    for path in iter_source_files(tree.root):
        files += 1
        text = path.read_text(encoding="utf-8", errors="replace")
        chunks += chunk_file(text, library=tree.library, file=str(path.relative_to(tree.root)), commit=tree.commit,
                             max_lines=max_lines)
    return chunks, files


def spread(items: list[Any], k: int | None) -> list[Any]:
    """At most k items spread evenly over the list (deterministic), all when k is None."""
    if k is None or len(items) <= k:
        return items
    return [items[(i * len(items)) // k] for i in range(k)]


def run_qa(settings: QASettings, *, client: Any = None, progress: bool = True) -> QAOutcome:
    started = time.monotonic()
    trees = [open_tree(src, settings.libraries[i] if settings.libraries else None, settings.licence)
             for i, src in enumerate(settings.sources)]
    per_tree = []
    for tree in trees:
        chunks, files = collect_chunks(tree, settings.max_lines)
        per_tree.append((tree, chunks, files))
    chunk_stats = {tree.library: _chunk_stats(tree, chunks, files) for tree, chunks, files in per_tree}
    out = Path(settings.out)
    if settings.chunks_only:
        out.mkdir(parents=True, exist_ok=True)
        summary = {"chunks": chunk_stats, "wall_s": round(time.monotonic() - started, 2)}
        write_json(out / "chunks-summary.json", summary)
        return QAOutcome(summary, EXIT_OK)

    identity = {"kind": "rocm_qa", "model": settings.model_name, "prompt_version": QA_GEN_PROMPT_VERSION,
                "params": settings.params.to_dict(), "pairs_per_chunk": settings.pairs_per_chunk,
                "max_lines": settings.max_lines, "max_span": settings.max_span}
    run_key = open_manifest(out, identity, {"sources": [str(t.root) for t in trees],
                                            "commits": {t.library: t.commit for t in trees},
                                            "llm": settings.llm, "base_url": settings.base_url,
                                            "max_chunks": settings.max_chunks})
    records = RecordStore(out / "records")
    done = _done_chunks(out / PROGRESS, run_key)
    dedup = Deduplicator()
    for rec in records.dicts(ROCM_QA):
        if rec["origin"].get("run") == run_key:
            dedup.seen(rec["qa"]["question"], rec["qa"]["answer"], rec["qa"]["grounding"]["identifiers"])
    todo = [(tree, c) for tree, chunks, _ in per_tree for c in spread(chunks, settings.max_chunks)
            if c.chunk_id not in done]
    own_client = client is None
    client = client or build_qa_client(settings)
    counts: collections.Counter = collections.Counter()
    by_library: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    error: BaseException | None = None
    journal = JsonlAppender(out / PROGRESS)
    dropped_log = JsonlAppender(out / DROPPED)
    try:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=f"rocm-qa ({settings.model_name})", unit="chunk", disable=not progress,
                   file=sys.stderr)
        failures = 0
        with ThreadPoolExecutor(settings.concurrency, thread_name_prefix="amdkv-qa") as pool:
            asked = pool.map(lambda item: _ask(client, item[1], settings), todo)
            for (tree, chunk), (reply, exc) in zip(todo, asked):
                bar.update(1)
                if exc is not None:
                    counts["chunks_failed"] += 1
                    if isinstance(exc, ClientConfigError):
                        error = exc
                        break
                    failures += 1
                    if failures >= settings.max_llm_failures:
                        error = exc
                        break
                    continue
                failures = 0
                chunk_counts = _judge(tree, chunk, reply, settings, dedup, records, run_key, dropped_log)
                counts.update(chunk_counts)
                by_library[tree.library].update(chunk_counts)
                journal.append({"run": run_key, "chunk": chunk.chunk_id, **chunk_counts})
                bar.set_postfix({k: counts[k] for k in ("proposed", "kept", "dropped")}, refresh=False)
            if error is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    finally:
        journal.close()
        dropped_log.close()
        records.close()
        if own_client:
            client.close()
    kept_total = sum(1 for r in records.dicts(ROCM_QA) if r["origin"].get("run") == run_key)
    summary = {"run": {"run_key": run_key, "model": settings.model_name, "prompt_version": QA_GEN_PROMPT_VERSION,
                       "out": str(out), "trees": [{"library": t.library, "commit": t.commit, "licence": t.licence,
                                                   "provenance": t.provenance} for t in trees]},
               "chunks": chunk_stats,
               "this_invocation": {"chunks_asked": len(todo), **dict(counts)},
               "by_library": {k: dict(v) for k, v in by_library.items()},
               "pairs_recorded": kept_total,
               "tokens": client.stats.to_dict(),
               "wall_s": round(time.monotonic() - started, 2)}
    write_json(out / "summary.json", summary)
    if isinstance(error, ClientConfigError):
        return QAOutcome(summary, EXIT_BAD_INPUT, error)
    return QAOutcome(summary, EXIT_INFRA if counts["chunks_failed"] else EXIT_OK, error)


def _ask(client: Any, chunk: Chunk, settings: QASettings) -> tuple[str | None, BaseException | None]:
    from amdkv.gen.llm import RequestContext

    try:
        (reply,) = client.chat(qa_request(chunk, settings.pairs_per_chunk), 1, settings.params,
                               context=RequestContext(chunk.chunk_id, stage="rocm_qa"))
        return reply.content, None
    except Exception as exc:  # noqa: BLE001 - counted per chunk; the run goes on (or stops on config errors)
        return None, exc


def _judge(tree: SourceTree, chunk: Chunk, reply: str, settings: QASettings, dedup: Deduplicator, records: Any,
           run_key: str, dropped: Any) -> dict[str, int]:
    """Parse, ground, deduplicate and record the pairs of one chunk (the dropped ones, with their
    reason, go to `dropped`, OUT/qa-dropped.jsonl, for auditing the filters); returns its counts."""
    pairs, malformed, found = parse_pairs(reply)
    counts: collections.Counter = collections.Counter(chunks_done=1, proposed=len(pairs) + malformed)
    if not found:
        counts["no_json"] += 1
    if malformed:
        counts["dropped"] += malformed
        counts["drop:malformed"] += malformed
    for i, pair in enumerate(pairs):
        g = check_pair(tree, file=pair.file, line_start=pair.line_start, line_end=pair.line_end, answer=pair.answer,
                       identifiers=pair.identifiers, max_span=settings.max_span)
        reason = g.reason if not g.grounded else ("duplicate" if dedup.seen(pair.question, pair.answer, g.identifiers)
                                                    else None)
        if reason is not None:
            counts["dropped"] += 1
            counts[f"drop:{reason}"] += 1
            dropped.append({"run": run_key, "chunk": chunk.chunk_id, "reason": reason, "missing": list(g.missing),
                            **dataclasses.asdict(pair)})
            continue
        qa = {"question": pair.question, "answer": pair.answer, "library": tree.library, "file": pair.file,
              "line_start": pair.line_start, "line_end": pair.line_end, "commit": tree.commit,
              "grounding": {**g.to_dict(), "chunk": chunk.chunk_id, "chunk_name": chunk.name,
                            "prompt_version": QA_GEN_PROMPT_VERSION}}
        origin = {"run": run_key, "model": settings.model_name, "chunk": chunk.chunk_id, "pair": i}
        records.append(Record.from_qa(**qa, origin=origin, licence=tree.licence, provenance=tree.provenance),
                       once_per_work_key=True)
        counts["kept"] += 1
    return dict(counts)


def _done_chunks(path: Path, run_key: str) -> set[str]:
    if not path.exists():
        return set()
    done = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line torn by a kill: that chunk is simply asked again
        if entry.get("run") == run_key:
            done.add(entry["chunk"])
    return done


def _chunk_stats(tree: SourceTree, chunks: Iterable[Chunk], files: int) -> dict[str, Any]:
    chunks = list(chunks)
    kinds = collections.Counter(c.kind for c in chunks)
    return {"commit": tree.commit, "licence": tree.licence, "files": files, "chunks": len(chunks),
            "functions": kinds.get("function", 0), "classes": kinds.get("class", 0),
            "truncated": sum(c.truncated for c in chunks),
            "lines_in_chunks": sum(c.line_end - c.line_start + 1 for c in chunks)}


def build_qa_client(settings: QASettings) -> Any:
    """The scripted QA model for llm=replay; else the generation clients with the request cache."""
    if settings.llm == "replay":
        from amdkv.gen.qa.scripted import ScriptedQA

        return ScriptedQA(settings.model_name)
    from amdkv.gen.clients import open_model_client, request_cache_dir

    cache = request_cache_dir(settings.request_cache, settings.out)
    return open_model_client(settings.llm, settings.model, base_url=settings.base_url, api_key=settings.api_key,
                             concurrency=settings.concurrency, request_timeout=settings.request_timeout,
                             retry=settings.retry, cache_dir=cache)
