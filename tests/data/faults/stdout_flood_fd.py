"""Fault: writes up to 4 GiB to file descriptor 1 directly (what C code's printf does), past the
Python-level capture. A forked worker's stdout is a file in its scratch folder: the file-size limit
(RLIMIT_FSIZE) stops the writes (EFBIG), and the candidate fails. Static checks refuse os.write:
run with them skipped."""
import os

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        chunk = b"x" * (1 << 24)
        written = 0
        try:
            while written < (4 << 30):
                written += os.write(1, chunk)
        except OSError as exc:
            raise RuntimeError(f"stdout stopped after {written} bytes: {exc}") from None
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out
