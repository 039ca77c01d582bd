"""Fault: SIGKILL to its parent (the fork server, or the verifier for an exec'd worker) and to the
verifier process. Landlock's signal scope refuses them and the harness lives; then the candidate
computes a correct relu. (Without that part of the sandbox this would kill the harness: the fault
runner skips it there.)"""
import os
import signal

import torch
import torch.nn as nn
import triton
import triton.language as tl

VERIFIER_PID = {{VERIFIER_PID}}


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        for pid in (os.getppid(), VERIFIER_PID):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass  # refused (the sandbox held): try the next target
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
