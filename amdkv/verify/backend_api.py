"""What a language backend may use of the verifier: the `RunAndJudge` protocol.

Why a protocol of its own: the Triton path (verifier.py) and the HIP-on-GPU path
(backends/hip_gpu.py) must apply the same static gate, take a spare worker, compute references,
run the candidate and judge its report the same way. Backends used to reach into private
`Verifier` methods for that; these few public methods are now the whole surface a backend sees,
so a new backend (or a change inside the verifier) has one contract to keep. `Verifier`
implements it; nothing here imports torch or Triton.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:  # types only: no import of the verifier (or torch) at runtime
    from amdkv.config import VerifierConfig
    from amdkv.tasks.types import Task
    from amdkv.verify.platform import PlatformInfo
    from amdkv.verify.verdict import Verdict
    from amdkv.verify.worker_protocol import BackendJobPart, WorkerReport


class RunAndJudge(Protocol):
    """The verifier as a language backend sees it."""

    platform: "PlatformInfo"
    config: "VerifierConfig"

    @property
    def timeout(self) -> float:
        """Wall-clock seconds a candidate's run may take."""

    @property
    def archs(self) -> tuple[str, ...]:
        """AMD targets to also compile for (resources only); empty when none were asked for."""

    def static_gate(self, v: "Verdict", task: "Task", source: str, language: str, label: str) -> bool:
        """Static checks of the candidate's text; True when they decided the verdict."""

    def finish(self, v: "Verdict", status: str, reason: str | None, *, compiled: bool | None = None,
               diag: str = "") -> None:
        """Decide the verdict: status, reason, `correct` from the status, `compiled` when known."""

    def run_and_judge(self, v: "Verdict", task: "Task", cand_path: Path, extra_job: "BackendJobPart | None" = None,
                      check_references: Callable[[dict[str, dict[str, Any]]], bool] | None = None,
                      ) -> tuple[bool, "WorkerReport | None"]:
        """Cases, references, one run in a spare worker with the backend's part of the job
        (`extra_job`), judging: `(judged, report)` with the worker's report; `judged` False when the
        verdict was decided before the candidate ran (no cases, or `check_references` returned True)."""
