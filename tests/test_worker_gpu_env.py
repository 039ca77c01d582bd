"""A GPU worker sees only its own GPU (platform.worker_gpu_env) and gets the rest of its environment
from pool.worker_env. No GPU needed: both map a platform and the parent's environment to the
worker's environment and device name; the GPU runs (docs/gpu.md, Throughput) are where workers
actually start with them."""

import pytest

from amdkv.config import VerifierConfig
from amdkv.errors import BadInputError
from amdkv.verify.platform import PlatformInfo, worker_gpu_env
from amdkv.verify.worker_protocol import WORKER_SETTINGS_ENV, WorkerSettings

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


def test_what_every_worker_gets(tmp_path):
    """pool.worker_env: a GPU worker's whole environment (no process is started, so no GPU needed)."""
    from amdkv.verify.pool import worker_env

    config = VerifierConfig(timing_method="graph", worker_threads=3)
    env, device = worker_env(gpu("cuda", 1), str(tmp_path), {"PATH": "/usr/bin", "TRITON_INTERPRET": "1"}, 0.14,
                             config)
    settings = WorkerSettings.from_json(env[WORKER_SETTINGS_ENV])  # the worker's settings: one JSON value
    assert device == "cuda:0" and settings.device == "cuda:0"
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and settings.visible_gpus == 1
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"  # one work queue: cheap context creation
    assert env["OMP_WAIT_POLICY"] == "PASSIVE"  # idle torch threads sleep between copies
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path)) and env["TMPDIR"] == str(tmp_path)
    assert "TRITON_INTERPRET" not in env and settings.gpu_mem_fraction == 0.14
    assert settings.timing_lock and env["PATH"] == "/usr/bin"
    assert settings.timing_method == "graph" and settings.worker_threads == 3  # from the config


def test_a_users_work_queue_setting_is_kept_and_rocm_gets_none(tmp_path):
    from amdkv.verify.pool import worker_env

    env, _ = worker_env(gpu("cuda", 0), str(tmp_path), {"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, None)
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "8"
    assert WorkerSettings.from_json(env[WORKER_SETTINGS_ENV]).gpu_mem_fraction is None
    env, _ = worker_env(gpu("rocm", 0), str(tmp_path), {}, None)
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in env and env["HIP_VISIBLE_DEVICES"] == "0"


def test_cpu_workers_run_the_interpreter_and_see_no_gpu_setting(tmp_path):
    from amdkv.verify.pool import worker_env

    env, device = worker_env(CPU, str(tmp_path), {}, None)
    assert device == "cpu" and env["TRITON_INTERPRET"] == "1"
    assert not {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "OMP_WAIT_POLICY"} & set(env)
    settings = WorkerSettings.from_json(env[WORKER_SETTINGS_ENV])
    assert settings.timing_lock is None and settings.visible_gpus is None
