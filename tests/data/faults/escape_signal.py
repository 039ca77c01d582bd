"""Escape: signals a process outside the sandbox (a victim the fault runner started: SIGUSR1) and
probes its parent (signal 0). Landlock's signal scope refuses both; then the candidate computes a
correct relu."""
import os
import signal

import torch
import torch.nn as nn
import triton
import triton.language as tl

VICTIM_PID = {{VICTIM_PID}}


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        escaped = []
        for pid, sig in ((VICTIM_PID, signal.SIGUSR1), (os.getppid(), 0)):
            try:
                os.kill(pid, sig)
                escaped.append(f"kill({pid}, {int(sig)})")
            except OSError:
                pass  # refused: not an escape, the next attempt runs
        if escaped:
            raise RuntimeError(f"ESCAPED: signalled {escaped}")
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
