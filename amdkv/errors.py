"""One error hierarchy for the whole library.

Every error says what was wrong and how to fix it; the CLI maps the class to an exit code
(DESIGN.md section 8: 0 done, 1 failures found, 2 bad input or usage, 3 infrastructure).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURES = 1
EXIT_BAD_INPUT = 2
EXIT_INFRA = 3


class AmdkvError(Exception):
    """Base class. `exit_code` is what the CLI returns when this escapes a command."""

    exit_code = EXIT_INFRA

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")


class BadInputError(AmdkvError):
    """The user gave us something unusable (unreadable file, missing `Model`, bad JSON...)."""

    exit_code = EXIT_BAD_INPUT


class TaskFormatError(BadInputError):
    """A task file does not follow the task format (docs/task_format.md)."""


class CandidateFormatError(BadInputError):
    """A candidate file cannot be judged at all (unreadable, no `ModelNew`, not Python)."""


class InfrastructureError(AmdkvError):
    """The harness or the machine failed; never the candidate's fault."""

    exit_code = EXIT_INFRA
    verdict_reason = "harness_failure"  # the reason of the infra_error verdict it becomes


class HostOutOfMemory(InfrastructureError):
    """The host's out-of-memory killer ended a worker (verify/host_oom.py)."""

    verdict_reason = "host_oom"
