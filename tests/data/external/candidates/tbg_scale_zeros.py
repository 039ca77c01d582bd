# A cheat for the TritonBench-G fixture tiny_scale: a kernel that writes zeros. GEAK-eval's fixed
# atol of 1e-3 accepts it on tiny-valued outputs; amdkv's tolerance scales with the output.
import torch
import triton
import triton.language as tl


@triton.jit
def zero_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)


def scale(x, factor):
    out = torch.empty_like(x)
    n = x.numel()
    zero_kernel[(triton.cdiv(n, 64),)](out, n, BLOCK=64)
    return out
