"""The verifier (DESIGN.md section 2). Imports only stdlib, torch, triton and numpy."""

from amdkv.verify.verdict import STATUSES, CaseResult, Verdict
from amdkv.verify.verifier import Verifier, verify_files

__all__ = ["STATUSES", "CaseResult", "Verdict", "Verifier", "verify_files"]
