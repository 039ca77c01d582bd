"""The few collective operations the reward and the rollout need, on whatever process group the
trainer runs (DDP/gloo on CPUs, NCCL on GPUs, DeepSpeed's), and identities when there is none.

Why not TRL's or accelerate's helpers: these are called from inside a reward function, which
gets no trainer object; `torch.distributed` is what every backend initialises. The tensor goes on
accelerate's device for this process (NCCL needs a GPU tensor, gloo a CPU one).
"""

from __future__ import annotations

from typing import Sequence


def _group_size() -> int:
    try:
        import torch.distributed as dist
    except ImportError:  # torch without distributed support
        return 1
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size()


def process_index() -> int:
    """This process's rank (0 without a process group)."""
    if _group_size() == 1:
        return 0
    import torch.distributed as dist

    return dist.get_rank()


def all_reduce_sum(values: Sequence[float]) -> list[float]:
    """Element-wise sum of `values` over every process (the values themselves with one process).
    Every process must call it, in the same order, with a vector of the same length."""
    if _group_size() == 1:
        return [float(v) for v in values]
    import torch
    import torch.distributed as dist

    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def any_rank(flag: bool) -> bool:
    """True on every process when `flag` is True on at least one."""
    return all_reduce_sum([1.0 if flag else 0.0])[0] > 0


def leave_process_group() -> None:
    """Tear this process's process group down before the interpreter exits (no-op without one).

    Why: with torch 2.13's gloo backend a process that exits with its group still up is aborted by
    a gloo thread ("terminate called without an active exception", exit 134) when its peer has
    already gone: on our 2-core machine 3 of 30 two-rank runs after a plain all-reduce, 7 of 30
    after the infra guard's stop, and 0 of 30 with this call first. Every rank calls it at the
    end of `train_sft.py`/`train_rl.py`, so the exit code is the run's own (0, or the error's).
    """
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _device():
    import torch

    try:
        from accelerate import PartialState

        return PartialState().device
    except Exception:  # noqa: BLE001 - accelerate absent or not set up: the backend decides
        import torch.distributed as dist

        if dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
