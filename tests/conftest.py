"""Shared fixtures. Tests run offline (HF_* offline variables are set by `make test`)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Reference caches of the test session live in a temp dir, not in the user's ~/.cache."""
    if "AMDKV_CACHE_DIR" not in os.environ:
        os.environ["AMDKV_CACHE_DIR"] = str(tmp_path_factory.mktemp("amdkv-cache"))
    # `evaluate.load` copies modules into HF_MODULES_CACHE (read when evaluate is first imported).
    os.environ.setdefault("HF_MODULES_CACHE", str(tmp_path_factory.mktemp("hf-modules")))
    # Every test that verifies means a real run: the verdict cache would answer a candidate that an
    # earlier test already verified. The tests of the cache itself switch it on explicitly.
    os.environ.setdefault("AMDKV_VERDICT_CACHE", "0")


def have_tool(name: str) -> bool:
    return shutil.which(name) is not None
