"""`amdkv serve`: a verification service (one per node, owning its GPUs) and `RemoteVerifier`,
its client with the local verifier's interface. Protocol version 1: docs/serve.md.

Light import: the names below load on first use, so importing the package (or the CLI) never
imports FastAPI, uvicorn, httpx or torch.

    from amdkv.serve import RemoteVerifier
    with RemoteVerifier("http://127.0.0.1:8765") as verifier:
        verdict = verifier.verify(task, source=text)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RemoteVerifier": "amdkv.serve.client",
    "ServeSettings": "amdkv.serve.service",
    "VerificationService": "amdkv.serve.service",
    "create_app": "amdkv.serve.app",
    "PROTOCOL": "amdkv.serve.protocol",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'amdkv.serve' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
