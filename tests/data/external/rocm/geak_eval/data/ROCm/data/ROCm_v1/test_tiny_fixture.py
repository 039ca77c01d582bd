# amdkv test fixture in GEAK-eval's ROCm layout: its test needs a pytest fixture amdkv does not provide
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

##################################################################################################################################################

import pytest
import torch

result_gold = {}


@pytest.fixture
def scratch_dir(tmp_path):
    yield tmp_path


def test_copy(scratch_dir, request):
    x = torch.randn(10, device='cuda')
    out = torch.empty_like(x)
    copy_kernel[(1,)](x, out, 10, BLOCK=16)
    result_gold[request.node.name] = out.cpu()
