"""Whether the kernel's out-of-memory killer ran while a worker did: a worker killed by SIGKILL in
that window is the machine's failure (`infra_error`), not the candidate's (`runtime_error`).

Why: on the H100 (2026-12-06) three small KernelBench candidates (`13_Matmul_for_symmetric_matrices`,
`16_Matmul_with_transposed_A`, `73_conv_transposed_3D...`) died by SIGKILL beside references of
several GB; KernelBench's harness passes all three. Workers set `oom_score_adj` 1000, so under host
memory pressure the killer takes a worker, whichever candidate it happens to be. A candidate's own
allocations cannot bring the killer: its host memory is capped (RLIMIT_DATA: private memory; shared
mappings are not counted, docs/sandbox.md) and fails as `MemoryError`/`oom` first.

The sign is the kernel's `oom_kill` counter in /proc/vmstat (Linux 4.13+, host-wide, readable
without privileges; it counts cgroup OOM kills too). It cannot say which process was killed, so a
SIGKILL from elsewhere in the same window (RLIMIT_CPU's hard limit) would be read as the host's: rare,
and an infra_error is verified again rather than counted against the candidate.
"""

from __future__ import annotations

VMSTAT = "/proc/vmstat"


def oom_kills(path: str = VMSTAT) -> int | None:
    """The host's OOM-kill count so far (None where the kernel does not say)."""
    try:
        with open(path) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def killed_by_host_oom(signal_name: str | None, before: int | None, after: int | None) -> str | None:
    """The infra_error message when a worker that died by `signal_name` likely met the OOM killer
    (the count rose between `before` and `after`); None otherwise."""
    if signal_name != "SIGKILL" or before is None or after is None or after <= before:
        return None
    return (f"the worker died by SIGKILL while the host's out-of-memory killer ended {after - before} process(es) "
            f"(/proc/vmstat oom_kill {before} -> {after}): the machine ran out of memory, not a limit of amdkv's")


HOST_OOM_HINT = ("verify with fewer jobs at once, or on a machine with more free memory (check what else holds it; a "
                 "tmpfs /tmp or cache folder keeps the verifier's files in memory); an infra_error is not counted "
                 "against the candidate, and a re-run (`amdkv eval`, `amdkv gen`) verifies it again")
