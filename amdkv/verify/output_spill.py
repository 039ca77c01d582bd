"""A candidate's large outputs saved to disk as soon as each checked call makes them, instead of held
in the worker's memory until its one save at the end.

Why: a candidate worker makes up to five checked calls per case (three trials, the re-check, the
call after timing) and used to keep every call's outputs on the host until the end. Its host memory
is capped (RLIMIT_DATA, `gpu_host_mem_gib`, 32 GiB by default), so the verifier's own bookkeeping was
charged to the candidate: ROCmBench's `rmsnorm_fwd` makes ~8.6 GB of outputs per call, four calls are
~34.4 GB, past the cap, and its own kernel would have been `runtime_error` for memory the benchmark's
test never needs at once. Spilled, the worker holds about one call's outputs.

Integrity: the files lie in the candidate's work folder, and a later call of the candidate runs in
the same process (native host code can write files without Python seeing it). So each file's digest
is taken when it is written, before any more candidate code runs, and travels in the outputs file,
which is written after all of it; the parent refuses a file whose bytes differ (`unloadable_outputs`,
hack_detected, under every policy). Python-level opens of the folder are refused by the file guard.

Outputs stay in memory while the worker holds less than its budget (`spill_outputs_mib`, 4 GiB by
default); a call whose outputs would take it past that is spilled. Spilling costs a write and a
digest in the worker and another in the parent (`spill_digest`: SHA-256 over 64-MiB chunks on several
threads, since session 23): measured in benchmarks/output_spill.py, docs/verifier.md; worth it only
where memory is the limit.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Callable

SPILL_FOLDER = "spilled-outputs"  # in the worker's work folder, beside the outputs file
# torch.save's headers, pickle and alignment over the tensors' bytes: what a file of outputs may take
# beyond them (~250 bytes a tensor, so this covers ~250,000 tensors)
FILE_HEADROOM_BYTES = 64 * 2**20
MARKER_KEY = "__amdkv_spilled__"  # a spilled call's place in the outputs file: {MARKER_KEY: name, "digest": hex of spill_digest}
_NAME = re.compile(r"^[0-9]{1,6}\.pt$")


def budget_under_file_limit(budget_bytes: int) -> int:
    """The spill budget a worker uses: at most `budget_bytes`, and less when this process's per-file
    limit (RLIMIT_FSIZE) is smaller, so that what it keeps in memory always fits its outputs file.
    Then only a single call's outputs can pass the limit, and the parent raises the limit above any
    correct call's (disk_admission.candidate_file_need): a write past it is the candidate's."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return budget_bytes
    return max(0, min(budget_bytes, soft - FILE_HEADROOM_BYTES))


def spill_folder_for(outputs_path: str) -> str:
    """Where a worker whose outputs file is `outputs_path` spills (both sides derive it from that path)."""
    return os.path.join(os.path.dirname(outputs_path), SPILL_FOLDER)


# The spill files' digest: SHA-256 over fixed chunks hashed on several threads, then SHA-256 over the
# chunks' digests (a two-level hash tree; its collision resistance is SHA-256's). Why not one SHA-256 of
# the file: one thread hashes ~1.4 GiB/s on the GPU machine (session 23), and each spilled call is
# hashed twice (worker and parent), so KernelBench's 6-GiB-per-call problems spent ~15 s of their ~90 s
# hashing. hashlib releases the GIL while it hashes, so threads divide the wall time; the CPU time is
# the same. Both sides compute it with this one function.
DIGEST_CHUNK_BYTES = 64 * 2**20
_READ_BYTES = 8 * 2**20  # each thread's reads, so a chunk never sits whole in memory
DIGEST_NAME = "sha256-tree-64MiB"  # what a marker's "digest" holds (a file's, not the chunks' list)


def _digest_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def _chunk_digest(fd: int, start: int, length: int) -> bytes:
    h = hashlib.sha256()
    end = start + length
    while start < end:
        block = os.pread(fd, min(_READ_BYTES, end - start), start)
        if not block:  # shorter than its stat said: the file changed under us
            raise OSError(f"the file ended at byte {start} of {end}")
        h.update(block)
        start += len(block)
    return h.digest()


def spill_digest(path: str | os.PathLike[str], threads: int | None = None) -> str:
    """The file's digest (DIGEST_NAME): its size and the SHA-256 of each DIGEST_CHUNK_BYTES chunk,
    hashed with SHA-256, the chunks on `threads` threads (default: this process's cores, at most 8)."""
    from concurrent.futures import ThreadPoolExecutor

    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        starts = range(0, size, DIGEST_CHUNK_BYTES)
        workers = min(threads or _digest_threads(), max(1, len(starts)))

        def chunk(start: int) -> bytes:
            return _chunk_digest(fd, start, min(DIGEST_CHUNK_BYTES, size - start))

        digests: list[bytes] | None = None
        if workers > 1:
            try:
                with ThreadPoolExecutor(workers, thread_name_prefix="amdkv-digest") as pool:
                    digests = list(pool.map(chunk, starts))
            except RuntimeError:  # "can't start new thread": a candidate may have used up RLIMIT_NPROC
                digests = None
        if digests is None:
            digests = [chunk(start) for start in starts]
    finally:
        os.close(fd)
    top = hashlib.sha256(f"{DIGEST_NAME}:{size}:".encode())
    for d in digests:
        top.update(d)
    return top.hexdigest()


class OutputSpill:
    """The worker's side: `keep(leaves)` returns the leaves themselves while the outputs it kept in
    memory stay within `budget_bytes`, else saves them to a file of their own and returns a marker
    naming it (and its hash) for the outputs file."""

    def __init__(self, folder: str, budget_bytes: int, save: Callable[[Any, str], None],
                 nbytes: Callable[[Any], int]) -> None:
        self.folder, self.budget_bytes = folder, budget_bytes
        self._save, self._nbytes = save, nbytes
        self.count = 0  # calls spilled
        self.held = 0  # bytes of the calls kept in memory
        # the write failure keep() raised, by identity: the worker treats only this one as the machine's
        # (a candidate raising an exception of the same class from its own code gets no infra_error)
        self.failure: BaseException | None = None
        os.makedirs(folder, exist_ok=True)  # before the candidate is imported: it cannot plant the folder

    def keep(self, leaves: Any) -> Any:
        if leaves is None:
            return leaves
        size = self._nbytes(leaves)
        if self.held + size <= self.budget_bytes:
            self.held += size
            return leaves
        name = f"{self.count}.pt"
        self.count += 1
        path = os.path.join(self.folder, name)
        try:
            self._save(leaves, path)
        except BaseException as exc:
            self.failure = exc
            raise
        return {MARKER_KEY: name, "digest": spill_digest(path)}


class SpillError(Exception):
    """A spilled call the parent cannot take: a bad name, a missing file, or bytes changed since written."""


def resolve_spilled(outputs: Any, folder: str, load: Callable[[str], Any]) -> Any:
    """The parent's side: `outputs` (the worker's outputs file, loaded) with every marker replaced by
    its file's contents (`load`: the judge's memory-mapped torch.load). The worker is untrusted: a
    name must be a plain numbered file in `folder`, a regular file, with the hash the marker says."""
    if isinstance(outputs, dict):
        if MARKER_KEY in outputs:
            return _load_marker(outputs, folder, load)
        return {k: resolve_spilled(v, folder, load) for k, v in outputs.items()}
    if isinstance(outputs, list):
        return [resolve_spilled(v, folder, load) for v in outputs]
    return outputs


def _load_marker(marker: dict[str, Any], folder: str, load: Callable[[str], Any]) -> Any:
    name, want = marker.get(MARKER_KEY), marker.get("digest")
    if set(marker) != {MARKER_KEY, "digest"} or not isinstance(name, str) or not _NAME.match(name) \
            or not isinstance(want, str):
        raise SpillError(f"a malformed spilled-outputs marker: {marker!r:.200}")
    path = os.path.join(folder, name)
    if os.path.islink(folder) or not os.path.isdir(folder) or os.path.islink(path) or not os.path.isfile(path):
        raise SpillError(f"spilled outputs {name}: not a regular file in the worker's {SPILL_FOLDER}/")
    got = spill_digest(path)
    if got != want:
        raise SpillError(f"spilled outputs {name} changed after the worker wrote them (digest {got[:16]}... "
                         f"instead of {want[:16]}...)")
    return load(path)
