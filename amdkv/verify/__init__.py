"""The verifier (DESIGN.md section 2). Imports only stdlib, torch, triton and numpy.

The names below load on first use (PEP 562), so `from amdkv.verify import Verdict, Candidate,
VerifierConfig` stays light (no torch, no triton): data and metric stages that only read verdicts
never pay for, or need, the GPU stack. `Verifier` and `open_verifier` import it when asked for.
"""

from __future__ import annotations

from amdkv._lazy import lazy_exports

_EXPORTS = {
    "STATUSES": "amdkv.verify.verdict",
    "CaseResult": "amdkv.verify.verdict",
    "Verdict": "amdkv.verify.verdict",
    "Candidate": "amdkv.verify.candidate",
    "VerifierConfig": "amdkv.config",
    "BaseVerifier": "amdkv.verify.api",
    "Verifier": "amdkv.verify.verifier",
    "verify_files": "amdkv.verify.verifier",
    "open_verifier": "amdkv.verify.scheduler",
    "MultiGpuScheduler": "amdkv.verify.scheduler",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
