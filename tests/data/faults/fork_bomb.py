"""Fault: forks (through libc, which no Python audit hook sees) until the kernel refuses; each child
sleeps forever. The worker's process limit (RLIMIT_NPROC in its user namespace) stops it; every
child dies with the worker's process group. Run with static checks skipped (ctypes is refused)."""
import ctypes

import torch
import torch.nn as nn
import triton
import triton.language as tl

LIBC = ctypes.CDLL(None, use_errno=True)


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        children = 0
        while children < 4096:
            pid = LIBC.fork()
            if pid == 0:
                while True:
                    LIBC.pause()
            if pid < 0:
                raise RuntimeError(f"FORK-REFUSED after {children} children (errno {ctypes.get_errno()})")
            children += 1
        raise RuntimeError(f"FORK-UNBOUNDED: {children} children")
