"""Wrong: passes the kernel a view of the input widened by 16 elements (inside the input's storage,
so torch allows it) and writes those 16 elements. Every access lies inside an argument as passed,
so the interpreter's access check lets it through; the guard bytes around the input catch it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)
    tail = n + tl.arange(0, 16)
    tl.store(x_ptr + tail, tl.zeros([16], dtype=tl.float32))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        wide = x.as_strided((n + 16,), (1,))
        _relu[(triton.cdiv(n, 1024),)](wide, out, n, BLOCK=1024)
        return out
