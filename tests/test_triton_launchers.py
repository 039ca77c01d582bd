"""Triton's kernel launchers built once by the parent and copied into spares (amdkv/verify/triton_launchers.py).

What is real: Triton's own launcher template and cache lookup, gcc, and the recording hook on
Triton's `make_launcher`. `libcuda.so.1` is conftest's empty stand-in (this machine has no NVIDIA
driver; nothing here loads what is built). What a GPU run adds, not shown here: a worker's Triton
building its launcher for a real kernel, and finding the shared one instead (benchmarks/throughput.py
phase option `:launchers`).
"""

from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the launcher is Triton's own C module")
from triton.backends.nvidia import driver as nv  # noqa: E402

from amdkv.verify import triton_launchers as tl  # noqa: E402

SIGNATURE = ["*fp32", "*fp32", "i32", "constexpr"]


def test_only_signatures_of_triton_type_names_are_believed() -> None:
    assert tl.valid_signature(SIGNATURE) and tl.valid_signature(["*bf16", "fp32", "u64", "*i1"])
    for bad in ([], "*fp32", [["*fp32"]], ["*fp32", 3], ["*fp32); system(\"x\"); //"], ["tensordesc<fp16[64]>"],
                ["*fp32 "], ["nvTmaDesc"], ["i32"] * (tl.MAX_ARGS + 1)):
        assert not tl.valid_signature(bad), bad


def test_a_shared_launcher_is_found_by_tritons_own_cache_lookup(tmp_path, fake_libcuda, monkeypatch) -> None:
    from triton.runtime.build import platform_key
    from triton.runtime.cache import get_cache_manager

    library = tl.LauncherLibrary(tmp_path / "launchers")
    try:
        builds = library.offer([SIGNATURE, SIGNATURE, ["*fp32); evil"], "not a list"])
        assert len(builds) == 1, "one build per new valid signature; invalid ones ignored"
        for b in builds:
            b.result()
        assert library.failures == 0
        assert library.offer([SIGNATURE]) == [], "a signature is built once"
    finally:
        library.close()
    spare_cache = tmp_path / "spare" / "triton_cache"
    assert tl.seed_launchers(str(spare_cache), tmp_path / "launchers") == 1
    # what compile_module_from_src computes in a worker (TRITON_CACHE_DIR = its own cache) for this signature
    src = nv.make_launcher({}, dict(enumerate(SIGNATURE)), None)
    key = hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(spare_cache))
    found = get_cache_manager(key).get_file(tl.LAUNCHER_NAME + sysconfig.get_config_var("EXT_SUFFIX"))
    assert found is not None and Path(found).stat().st_size > 10_000
    shared = next((tmp_path / "launchers").glob(f"*/{tl.LAUNCHER_NAME}*"))
    assert Path(found).read_bytes() == shared.read_bytes() and Path(found).stat().st_ino != shared.stat().st_ino
    assert tl.seed_launchers(str(spare_cache), tmp_path / "launchers") == 0, "a spare's copy is never rewritten"


def test_a_build_that_cannot_run_here_is_counted_not_raised(tmp_path, monkeypatch) -> None:
    """No libcuda: the build fails, the verification that offered it is not affected (speed only)."""
    monkeypatch.setattr(nv, "library_dirs", lambda: [str(tmp_path / "nowhere")])
    library = tl.LauncherLibrary(tmp_path / "launchers")
    try:
        for b in library.offer([SIGNATURE]):
            b.result()
    finally:
        library.close()
    assert library.failures == 1 and tl.seed_launchers(str(tmp_path / "c"), tmp_path / "launchers") == 0


def test_the_worker_hook_records_what_triton_builds_a_launcher_for(monkeypatch) -> None:
    monkeypatch.setattr(nv, "make_launcher", nv.make_launcher)  # restored after the test
    seen = tl.record_launcher_signatures()
    src = nv.make_launcher({}, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, None)
    nv.make_launcher({}, {"desc": "tensordesc<fp16[64,64]>", "n": "i32"}, [None])  # a tensor descriptor
    nv.make_launcher({}, {"pair": ("*fp32", "*fp32")}, None)  # a tuple argument
    assert "PyObject" in src and seen == [["*fp32", "i32", "constexpr"]], \
        "only the plain signature is reported (the parent does not rebuild the other two)"
    assert tl.launcher_source(seen[0]) == src, "the parent's source is the one the worker's Triton built"


def test_only_a_spares_own_triton_cache_gets_launchers_and_only_when_asked() -> None:
    """The driver helper's rule (a reference worker's cache is shared with running ones: never seeded);
    on by default since session 22's H100 run, off when asked."""
    from amdkv.config import VerifierConfig
    from amdkv.verify.platform import PlatformInfo
    from amdkv.verify.pool import seeds_triton_launchers

    cuda = PlatformInfo(name="cuda", device="cuda:0", can_time=True, interpreter=False)  # a description: no GPU touched
    cpu = PlatformInfo(name="cpu", device="cpu", can_time=False, interpreter=True)
    on = VerifierConfig(share_triton_launchers=True)
    assert VerifierConfig().share_triton_launchers
    assert seeds_triton_launchers(cuda, on, None) and not seeds_triton_launchers(cpu, on, None)
    assert not seeds_triton_launchers(cuda, on, {"TRITON_CACHE_DIR": "/shared/compile-cache/triton"})
    assert not seeds_triton_launchers(cuda, VerifierConfig(share_triton_launchers=False), None)


def test_what_a_worker_reports_is_plain_whatever_the_candidate_put_in_the_list() -> None:
    """The recorded list lives in the candidate's process: the report keeps lists of strings only (a
    report that cannot be written as JSON would make the candidate's verdict a harness failure)."""
    import json

    class Loud(list):
        def __iter__(self):
            raise RuntimeError("made to raise")

    junk = [["*fp32", object(), "i32"], "x", [1, 2], *[["i32"]] * 40]
    plain = tl.plain_signatures(junk)
    assert plain[0] == ["*fp32", "i32"] and plain[1] == [] and len(plain) <= tl.MAX_SIGNATURES_PER_REPORT
    json.dumps(plain)
    assert tl.plain_signatures(Loud([["i32"]])) == [] and tl.plain_signatures(None) == []
