"""`amdkv.source_ast.parse`: the one way amdkv parses Python, one thread at a time.

Why: CPython 3.11's AST constructor keeps its recursion depth in state every thread shares, so two
threads in `ast.parse` at once can raise "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905). The verifier parses candidates in several threads; CI saw that as an
`infra_error` for a correct candidate. A test that shows the race itself would be a flaky test (1
parse in ~240 failed with a garbage-collecting thread beside 8 parsing ones, 2-core machine), so
these tests check the two things that keep it away: the lock is taken, and no module goes around it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from amdkv import source_ast

REPO = Path(__file__).resolve().parent.parent


def test_parse_waits_for_the_lock() -> None:
    done = threading.Event()
    with source_ast._PARSE_LOCK:
        t = threading.Thread(target=lambda: (source_ast.parse("x = 1"), done.set()))
        t.start()
        assert not done.wait(0.3), "parse ran while another thread held the parse lock"
    t.join(5)
    assert done.is_set()


def test_parse_keeps_ast_parse_behaviour() -> None:
    tree = source_ast.parse("def f(a):\n    return a\n", filename="cand.py")
    assert [type(n).__name__ for n in tree.body] == ["FunctionDef"]
    with pytest.raises(SyntaxError) as err:
        source_ast.parse("def f(:\n", filename="cand.py")
    assert err.value.filename == "cand.py"


def test_no_module_parses_around_the_lock() -> None:
    direct = [f"{p.relative_to(REPO)}:{i}" for p in sorted((REPO / "amdkv").rglob("*.py")) if p.name != "source_ast.py"
              for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bast\.parse\(", line)]
    assert direct == [], "call amdkv.source_ast.parse instead of ast.parse (see its lock): " + ", ".join(direct)
