"""The library's source identity (amdkv/env.py `source_hash`, `tree_hash`): what the verdict cache keys on
beside the version and the commit, so that an edited verifier (uncommitted, or a copy without `.git`, or a
stale `.git` as on the GPU machine in session 26) never gets an old verdict back."""

from __future__ import annotations

from pathlib import Path

import pytest

import amdkv
from amdkv import env
from amdkv.verify import verdict_cache


def _tree(root: Path) -> Path:
    (root / "verify").mkdir(parents=True)
    (root / "verify" / "compare.py").write_text("TOL = 1e-3\n")
    (root / "__init__.py").write_text("")
    return root


def test_tree_hash_follows_every_byte_and_name_and_ignores_bytecode(tmp_path: Path) -> None:
    root = _tree(tmp_path / "pkg")
    first = env.tree_hash(root)
    assert env.tree_hash(root) == first and len(first) == 64
    (root / "verify" / "__pycache__").mkdir()
    (root / "verify" / "__pycache__" / "compare.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert env.tree_hash(root) == first  # bytecode is made from what is hashed
    (root / "verify" / "compare.py").write_text("TOL = 1e-2\n")  # one byte of the verifier
    edited = env.tree_hash(root)
    assert edited != first
    (root / "verify" / "compare.py").rename(root / "verify" / "compare2.py")  # same bytes, another name
    assert env.tree_hash(root) not in (first, edited)
    # the same files elsewhere hash the same: a checkout, a wheel's copy and the GPU machine's copy agree
    assert env.tree_hash(_tree(tmp_path / "elsewhere")) == first


def test_the_installed_package_is_hashed_and_reported() -> None:
    assert env.source_hash() == env.tree_hash(Path(amdkv.__file__).resolve().parent)
    assert env.collect_env(with_gpu=False)["amdkv_source"] == env.source_hash()[:12]


def test_the_verdict_cache_identity_changes_with_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same version, same commit, another source: another identity, so no cached verdict is shared."""
    verdict_cache._library_identity.cache_clear()
    before = verdict_cache.verifier_identity({"policy": "strict"}, "cpu", "cpu")
    commit = env.git_hash()
    monkeypatch.setattr(env, "git_hash", lambda: commit)  # the commit unchanged
    monkeypatch.setattr(env, "source_hash", lambda: "0" * 64)
    verdict_cache._library_identity.cache_clear()
    try:
        after = verdict_cache.verifier_identity({"policy": "strict"}, "cpu", "cpu")
    finally:
        verdict_cache._library_identity.cache_clear()
    assert after != before


def test_every_report_header_names_the_source_when_the_env_has_it() -> None:
    assert env.describe_library({"amdkv": "0.1.0", "amdkv_git": "abc", "amdkv_source": "f00d"}) == \
        "0.1.0 (git abc, source f00d)"
    assert env.describe_library({"amdkv": "0.1.0", "amdkv_git": None}) == "0.1.0 (git None)"  # older reports
    from amdkv.evaluation.report_md import header_lines

    line = next(x for x in header_lines({"env": {"amdkv": "0.1.0", "amdkv_git": "abc", "amdkv_source": "f00d"},
                                         "settings": {}}) if x.startswith("- **amdkv:**"))
    assert line.startswith("- **amdkv:** 0.1.0 (git abc, source f00d), torch")
