"""Triton's per-signature kernel launcher (`__triton_launcher`), built once by the trusted parent for each
argument signature candidates used, and copied into every later spare's private Triton cache.
On by default since session 22 (`AMDKV_SHARE_TRITON_LAUNCHERS=0` turns it off): on one H100 it cut
0.25-0.34 host core-seconds per Triton candidate, every verdict the same (docs/gpu.md).

Why: every candidate compiles into an empty private Triton cache (a candidate must not reach another's
compiled kernels), so every candidate's first launch also runs gcc on Triton's launcher: on the H100
of session 20 the compilers' share of a candidate's first checked call was 0.226 CPU-s, of which the
ptxas runs of the later calls suggest ~0.05 is ptxas and the rest gcc, against issue 20's goal of
2.5 host core-seconds per candidate (2.56 measured).

Why this shares nothing a candidate made:
- The launcher's C source is Triton's own template (`make_launcher`), filled from the kernel's
  argument types alone. A pointer's element type does not even reach the source, and a scalar's type
  is looked up in Triton's table.
- The parent makes that source itself, with Triton's code, from the types a worker reports. The report
  is untrusted data: every type must be one of Triton's scalar or pointer type names
  (`valid_signature`), or the signature is ignored.
- The parent compiles every shared file. Each spare gets its own copy, renamed into place
  (`triton_stubs.seed_file`), so a candidate that overwrote its copy changes nothing for the next.
- A launcher found this way is the file the worker's Triton would have built for that signature, so
  verdicts cannot change; only the gcc run goes.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import threading
from pathlib import Path
from typing import Any

from amdkv.verify.triton_stubs import build_cached_module, seed_file

LAUNCHER_NAME = "__triton_launcher"  # compile_module_from_src's name in Triton's CudaLauncher
LAUNCHERS_DIR = "triton-launchers"  # under the verifier's cache folder (config.cache_dir)
_DTYPES = ("i1", "i8", "i16", "i32", "i64", "u1", "u8", "u16", "u32", "u64", "fp16", "bf16", "fp32", "f32", "fp64",
           "fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16")
SIGNATURE_TYPE = re.compile(r"\*?(?:%s)|constexpr" % "|".join(_DTYPES))
MAX_ARGS = 128  # a kernel with more arguments is not shared (and a report listing more is not believed)
MAX_SIGNATURES_PER_REPORT = 16
MAX_SEEDED = 256  # launchers copied into one spare, most recently built first
# signatures one process builds at most: a candidate can report made-up valid signatures, each costing the
# parent one gcc run (~0.15 CPU-s); 16 per report and this many in all bound what that costs
MAX_BUILDS = 4096


def valid_signature(signature: Any) -> bool:
    """A worker-reported signature the parent may build from: a list of Triton type names only."""
    return (isinstance(signature, list) and 0 < len(signature) <= MAX_ARGS
            and all(isinstance(t, str) and SIGNATURE_TYPE.fullmatch(t) for t in signature))


def record_launcher_signatures() -> list[list[str]]:
    """In a worker, before the candidate's code runs: every launcher Triton builds from now on adds its
    signature to the returned list (only plain ones: no tensor descriptors or tuples). On a machine
    without Triton's NVIDIA backend the list stays empty."""
    seen: list[list[str]] = []
    import torch

    if torch.version.hip is not None:  # ROCm: Triton's AMD backend builds its own launchers (not shared)
        return seen
    try:
        from triton.backends.nvidia import driver
    except Exception:  # noqa: BLE001 - no NVIDIA backend: nothing to record
        return seen
    original = driver.make_launcher

    def recording(constants: Any, signature: dict[Any, Any], tensordesc_meta: Any) -> Any:
        values = list(signature.values())
        if not tensordesc_meta and all(isinstance(v, str) for v in values) and len(seen) < MAX_SIGNATURES_PER_REPORT:
            seen.append(values)
        return original(constants, signature, tensordesc_meta)

    driver.make_launcher = recording
    return seen


def plain_signatures(recorded: Any) -> list[list[str]]:
    """What a worker reports of its recorded signatures: lists of strings only, at most
    MAX_SIGNATURES_PER_REPORT. The list lived in the candidate's process, which may have put anything
    in it; a report that cannot be written would turn the candidate's verdict into a harness failure."""
    try:
        items = list(recorded)[:MAX_SIGNATURES_PER_REPORT] if isinstance(recorded, list) else []
        return [[t for t in s if type(t) is str] for s in items if type(s) is list]
    except Exception:  # noqa: BLE001 - a list made to raise on iteration: report none
        return []


def launcher_source(signature: list[str]) -> str:
    """Triton's launcher source for `signature` (trusted code, validated types)."""
    from triton.backends.nvidia import driver

    return driver.make_launcher({}, dict(enumerate(signature)), None)


class LauncherLibrary:
    """The parent's shared launchers under `root`, built in one background thread as candidates'
    reports name new signatures (a verification never waits for a build)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._known: set[tuple[str, ...]] = set()
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="amdkv-launchers")
        self.failures = 0  # builds that raised (speed only: that signature's candidates build their own)

    def offer(self, signatures: Any) -> list[concurrent.futures.Future[None]]:
        """Build the valid signatures not seen before; the rest is ignored. Returns the builds started."""
        started = []
        for signature in (signatures if isinstance(signatures, list) else [])[:MAX_SIGNATURES_PER_REPORT]:
            if not valid_signature(signature):
                continue
            key = tuple(signature)
            with self._lock:
                if key in self._known or len(self._known) >= MAX_BUILDS:
                    continue
                self._known.add(key)
            started.append(self._pool.submit(self._build, list(key)))
        return started

    def _build(self, signature: list[str]) -> None:
        try:
            build_cached_module(LAUNCHER_NAME, launcher_source(signature), str(self.root))
        except Exception:  # noqa: BLE001 - speed only
            self.failures += 1

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def seed_launchers(triton_cache_dir: str, root: str | os.PathLike[str], limit: int = MAX_SEEDED) -> int:
    """Copy the shared launchers (most recently built first, at most `limit`) into one spare's Triton
    cache where its Triton looks for them. Returns how many it copied."""
    try:
        built = sorted(Path(root).glob(f"*/{LAUNCHER_NAME}*"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return 0
    copied = 0
    for so in built[:limit]:
        try:
            copied += seed_file(so, triton_cache_dir, so.parent.name)
        except OSError:  # removed meanwhile, or a full disk: that spare builds its own
            continue
    return copied


@functools.lru_cache(maxsize=8)
def library_for(cache_dir: str) -> LauncherLibrary:
    """The one library of a cache folder in this process (every Verifier sharing it)."""
    return LauncherLibrary(Path(cache_dir) / LAUNCHERS_DIR)
