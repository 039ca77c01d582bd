"""Language backends see the verifier only through `backend_api.RunAndJudge` (issue 20).

Static checks (no GPU, no worker): the Verifier provides every member of the protocol, and the
backends use no private attribute of the verifier they are given, so the protocol stays the whole
contract between the verifier and its backends.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from amdkv.verify import backend_api
from amdkv.verify.verifier import Verifier

BACKENDS = Path(backend_api.__file__).resolve().parent / "backends"


def _protocol_members() -> set[str]:
    return {name for name in vars(backend_api.RunAndJudge) if not name.startswith("_")} | set(
        backend_api.RunAndJudge.__annotations__)


def test_verifier_provides_the_whole_protocol():
    members = _protocol_members()
    assert {"finish", "run_and_judge", "static_gate", "timeout", "archs", "platform", "config"} <= members
    init_source = "".join(inspect.getsource(cls) for cls in Verifier.__mro__ if cls.__module__.startswith("amdkv."))
    for name in sorted(members):
        assert hasattr(Verifier, name) or f"self.{name} =" in init_source, f"Verifier lacks {name!r}"
    for name in ("finish", "run_and_judge", "static_gate"):
        want = list(inspect.signature(getattr(backend_api.RunAndJudge, name)).parameters)
        got = list(inspect.signature(getattr(Verifier, name)).parameters)
        assert got == want, f"Verifier.{name}{got} differs from RunAndJudge.{name}{want}"


def test_backends_use_no_private_verifier_attribute():
    used: list[str] = []
    for path in sorted(BACKENDS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "verifier"):
                if node.attr.startswith("_"):
                    used.append(f"{path.name}:{node.lineno} verifier.{node.attr}")
                else:
                    assert node.attr in _protocol_members(), (
                        f"{path.name}:{node.lineno} uses verifier.{node.attr}, which RunAndJudge does not declare")
    assert used == [], "backends reach into the verifier's private methods:\n" + "\n".join(used)
