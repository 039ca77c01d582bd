import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * factor, mask=mask)


def scale(x, factor):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 64),)](x, out, n, factor, BLOCK=64)
    return out


##################################################################################################################################################


def test_scale():
    # amdkv test fixture in TritonBench-G's layout. Tiny values on purpose: a fixed absolute
    # tolerance of 1e-3 cannot tell a correct output from zeros here.
    results = {}
    x = torch.randn(100, device='cuda') * 1e-4
    results['test_case_1'] = scale(x, 2.0)
    y = torch.randn(37, device='cuda') * 1e-4
    results['test_case_2'] = scale(y, -0.5)
    results['test_case_3'] = scale(torch.randn(0, device='cuda'), 3.0)
    return results


result_gold = test_scale()
print(result_gold)
