"""The Triton driver helper the parent builds once for every spare (amdkv/verify/triton_stubs.py).

This machine has no NVIDIA driver, so `libcuda.so.1` is played by an empty shared library of that
name (conftest's `fake_libcuda`: the helper links against it; nothing here loads the result). What is
real: Triton's own helper source, gcc, and Triton's cache lookup, which must find the seeded copy
under the key a worker's Triton computes, or every spare would still run gcc.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="the stub is Triton's own C helper")
from triton.backends.nvidia import driver as nv  # noqa: E402

from amdkv.verify import triton_stubs  # noqa: E402


def test_seeded_helper_is_found_by_tritons_own_cache_lookup(tmp_path, fake_libcuda, monkeypatch):
    from triton.runtime.build import platform_key
    from triton.runtime.cache import get_cache_manager

    stubs = tmp_path / "stubs"
    key, so = triton_stubs.cuda_driver_stub(str(stubs))
    assert Path(so).is_file() and Path(so).stat().st_size > 10_000
    spare_cache = tmp_path / "spare" / "triton_cache"
    assert triton_stubs.seed_spare_cache(str(spare_cache), str(stubs))
    # what compile_module_from_src computes inside a worker whose TRITON_CACHE_DIR is spare_cache
    import hashlib

    src = Path(nv.dirname, "driver.c").read_text()
    triton_key = hashlib.sha256((src + platform_key()).encode("utf-8")).hexdigest()
    monkeypatch.setenv("TRITON_CACHE_DIR", str(spare_cache))
    found = get_cache_manager(triton_key).get_file("cuda_utils" + sysconfig.get_config_var("EXT_SUFFIX"))
    assert found is not None and Path(found).read_bytes() == Path(so).read_bytes()
    seeded = Path(found)
    assert seeded.stat().st_ino != Path(so).stat().st_ino, "each spare gets a copy, never the shared file"
    seeded.write_bytes(b"overwritten by a candidate")
    other = tmp_path / "other" / "triton_cache"
    triton_stubs.seed_spare_cache(str(other), str(stubs))
    assert Path(other, key, seeded.name).read_bytes() == Path(so).read_bytes()


def test_no_stub_where_it_cannot_be_built(tmp_path, monkeypatch):
    """No libcuda (this machine without the stand-in): None, and spares build their own as before."""
    triton_stubs.cuda_driver_stub.cache_clear()
    monkeypatch.setattr(nv, "library_dirs", lambda: [str(tmp_path / "nowhere")])
    try:
        assert triton_stubs.cuda_driver_stub(str(tmp_path / "stubs")) is None
        assert not triton_stubs.seed_spare_cache(str(tmp_path / "c"), str(tmp_path / "stubs"))
    finally:
        triton_stubs.cuda_driver_stub.cache_clear()


def test_spares_started_at_once_share_one_build(tmp_path, fake_libcuda, monkeypatch):
    """Spares start from many threads: before the fix each built the helper and wrote one shared
    temporary file, so a spare could copy a file another thread was still writing. One build now,
    and every spare's copy is the whole file."""
    import threading

    import triton.runtime.build as triton_build

    real_build, builds = triton_build._build, []

    def counting_build(*args, **kwargs):
        builds.append(threading.get_ident())
        return real_build(*args, **kwargs)

    monkeypatch.setattr(triton_build, "_build", counting_build)
    stubs, start = tmp_path / "stubs", threading.Barrier(4)

    def spare(i: int) -> None:
        start.wait()
        assert triton_stubs.seed_spare_cache(str(tmp_path / f"spare{i}"), str(stubs))

    threads = [threading.Thread(target=spare, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1, f"{len(builds)} builds for 4 spares started at once"
    key, so = triton_stubs.cuda_driver_stub(str(stubs))
    for i in range(4):
        assert Path(tmp_path / f"spare{i}", key, Path(so).name).read_bytes() == Path(so).read_bytes()
    assert not [p for p in Path(so).parent.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_a_copy_never_changes_what_a_running_process_mapped(tmp_path):
    """The H200 crashes (session 12): reference workers share one Triton cache, and each new one
    seeded the helper there with an in-place copy, truncating and rewriting the library the running
    ones had mapped. Shown here with a plain file mapped the way the loader maps a library
    (MAP_PRIVATE, read-only): an in-place copy changes the mapped bytes under the process; the copy
    the seeding makes now (rename into place) and a second seeding (no rewrite) do not."""
    import mmap
    import shutil

    old, new = b"A" * 8192, b"B" * 8192
    src_new = tmp_path / "new.so"
    src_new.write_bytes(new)

    def mapped_after(replace) -> bytes:
        lib = tmp_path / "cache" / "cuda_utils.so"
        lib.parent.mkdir(exist_ok=True)
        lib.write_bytes(old)
        with open(lib, "rb") as f:
            view = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
        replace(lib)
        seen = view[:16]
        view.close()
        return seen

    assert mapped_after(lambda lib: shutil.copyfile(src_new, lib)) == new[:16], "an in-place copy rewrites the mapping"
    assert mapped_after(lambda lib: triton_stubs._copy_atomically(src_new, lib)) == old[:16]


def test_seeding_never_rewrites_a_helper_already_there(tmp_path, fake_libcuda):
    stubs = tmp_path / "stubs"
    cache = tmp_path / "shared" / "triton_cache"
    assert triton_stubs.seed_spare_cache(str(cache), str(stubs))
    key, so = triton_stubs.cuda_driver_stub(str(stubs))
    placed = Path(cache, key, Path(so).name)
    before = placed.stat()
    assert triton_stubs.seed_spare_cache(str(cache), str(stubs))
    after = placed.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_only_a_spares_own_triton_cache_is_seeded():
    from amdkv.config import VerifierConfig
    from amdkv.verify.platform import PlatformInfo
    from amdkv.verify.pool import seeds_triton_stub

    cuda = PlatformInfo(name="cuda", device="cuda:0", can_time=True, interpreter=False)  # a description: no GPU touched
    on = VerifierConfig(seed_triton_stubs=True)
    assert seeds_triton_stub(cuda, on, None)
    assert not seeds_triton_stub(cuda, on, {"TRITON_CACHE_DIR": "/shared/compile-cache/triton"})  # a reference worker
    assert not seeds_triton_stub(cuda, VerifierConfig(seed_triton_stubs=False), None)
