"""A GPU worker sees only its own GPU (platform.worker_gpu_env). No GPU needed: the function maps a
platform and the parent's environment to the worker's environment and device name; the GPU runs
(docs/gpu.md, Throughput) are where workers actually start with it."""

import pytest

from amdkv.errors import BadInputError
from amdkv.verify.platform import PlatformInfo, worker_gpu_env

CPU = PlatformInfo("cpu", "cpu", can_time=False, interpreter=True)


def gpu(name: str, index: int) -> PlatformInfo:
    return PlatformInfo(name, f"cuda:{index}", can_time=True, interpreter=False)


def test_cpu_workers_get_no_gpu_setting():
    assert worker_gpu_env(CPU, {"CUDA_VISIBLE_DEVICES": "0,1"}) == ({}, "cpu")


def test_nvidia_worker_sees_its_index_as_cuda0():
    assert worker_gpu_env(gpu("cuda", 1), {}) == ({"CUDA_VISIBLE_DEVICES": "1"}, "cuda:0")


def test_inherited_list_is_indexed_not_replaced():
    # the parent sees GPUs 3 and 5 as cuda:0 and cuda:1: its cuda:1 is the machine's GPU 5
    assert worker_gpu_env(gpu("cuda", 1), {"CUDA_VISIBLE_DEVICES": "3, 5"}) == ({"CUDA_VISIBLE_DEVICES": "5"}, "cuda:0")
    env, _ = worker_gpu_env(gpu("cuda", 0), {"CUDA_VISIBLE_DEVICES": "GPU-8f2c,GPU-77aa"})
    assert env == {"CUDA_VISIBLE_DEVICES": "GPU-8f2c"}


def test_index_past_the_inherited_list_is_a_clear_error():
    with pytest.raises(BadInputError, match=r"CUDA_VISIBLE_DEVICES='2' lists 1 GPU"):
        worker_gpu_env(gpu("cuda", 1), {"CUDA_VISIBLE_DEVICES": "2"})


def test_rocm_uses_hip_visible_devices():
    assert worker_gpu_env(gpu("rocm", 2), {}) == ({"HIP_VISIBLE_DEVICES": "2"}, "cuda:0")
    assert worker_gpu_env(gpu("rocm", 1), {"HIP_VISIBLE_DEVICES": "4,6"}) == ({"HIP_VISIBLE_DEVICES": "6"}, "cuda:0")
    # HIP falls back to CUDA_VISIBLE_DEVICES when HIP_VISIBLE_DEVICES is unset
    assert worker_gpu_env(gpu("rocm", 0), {"CUDA_VISIBLE_DEVICES": "7"}) == ({"HIP_VISIBLE_DEVICES": "7"}, "cuda:0")
