# amdkv test fixture in GEAK-eval's ROCm layout (written for amdkv's tests; not a benchmark file)
import numpy as np
import pytest
import torch
from torch.testing import assert_close

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

##################################################################################################################################################   

import os
import random

import numpy as np
import pytest
import torch
from torch.testing import assert_close
from geak_eval.perf.ROCm.performance_utils_pytest import PytestBenchmarker, do_bench_config

result_gold = {}


def set_seed(seed: int = 42) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@pytest.mark.parametrize('SIZE,BLOCK', [(37, 16), (128, 64)])
@pytest.mark.parametrize('dtype_str', ['float32', 'float16'])
def test_add(SIZE, BLOCK, dtype_str, request):
    set_seed()
    dtype = getattr(torch, dtype_str)
    x = torch.randn(SIZE, device='cuda', dtype=dtype)
    y = torch.randn(SIZE, device='cuda', dtype=dtype)
    out = torch.empty(SIZE, device='cuda', dtype=dtype)
    add_kernel[(triton.cdiv(SIZE, BLOCK),)](x, y, out, SIZE, BLOCK=BLOCK)
    result_gold['_CALL_SUCCESS_'] = torch.tensor([[1.0]])
    key = request.node.name.replace('[', '_').replace(']', '').replace('-', '_')
    result_gold[key] = out.clone().detach().cpu()
    assert_close(out, x + y, rtol=1e-2, atol=1e-3)


@pytest.mark.skipif(True, reason="always skipped: checks that skipif marks are honoured")
def test_never_runs():
    result_gold['never'] = torch.ones(1)


def test_self_skips():
    pytest.skip("checks that pytest.skip() inside a test is honoured")


def test_performance(request):
    PytestBenchmarker(op_callable=None, op_name="add", config=do_bench_config())


def test_save_results():
    torch.save(result_gold, __file__ + ".pt")
