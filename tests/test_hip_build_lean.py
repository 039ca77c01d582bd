"""The `lean` HIP build scheme (platform cuda, `VerifierConfig.hip_lean_build`): kernels in an nvcc
unit without torch, launchers rewritten to cudaLaunchKernel in a host unit with the binding.

Text work and the build order are tested without compilers; the real compile (nvcc + g++, then the
symbol check that every launched kernel is exported by the device object) is marked slow. Running
a lean-built extension needs an NVIDIA GPU and is not done here (docs/hip.md says so).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from amdkv.verify.backends import hip_build, hip_toolchain, hip_units
from amdkv.verify.backends.hip_sources import _mask_comments_strings as code_only
from amdkv.verify.backends.hip_units import SplitUnavailable, lean_parts

from test_hip_build_split import CI_INCLUDE, FAKE_CUDA, RELU, _FakeBuild, _kb_capture, need_nvcc_and_gxx

KB = """#include <hip/hip_runtime.h>
#define BLOCK 256
struct Pair { float a, b; };
__device__ __forceinline__ float twice(float v) { return 2.f * v; }
__host__ __device__ inline int ceil_div(int a, int b) { return (a + b - 1) / b; }
__global__ void __launch_bounds__(BLOCK) scale(const float* __restrict__ x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;  // a comment with <<<1, 2>>> in it
  if (i < n) y[i] = twice(x[i]);
}
int host_helper(int n) { return ceil_div(n, BLOCK); }
torch::Tensor f(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int n = x.numel();
  scale<<<host_helper(n), BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  hipLaunchKernelGGL(scale, dim3(1), dim3(BLOCK), 0, 0, x.data_ptr<float>(), y.data_ptr<float>(), (int64_t)n);
  return y;
}
"""


def test_lean_parts_split_kernels_from_torch() -> None:
    device, host, kernels = lean_parts(KB)
    assert kernels == ("scale",)
    assert len(device.splitlines()) == len(KB.splitlines())   # blanked, not cut: line numbers kept
    # device: kernels, device and host-device functions, types, macros; no torch, no host functions
    assert "y[i] = twice(x[i])" in device and "struct Pair" in device and "ceil_div(int a" in device
    assert "torch" not in device and "host_helper" not in device and "<<<" not in code_only(device)
    # host: the kernel only declared, the device-only helper gone, host code kept, launches rewritten
    assert "__global__ void __launch_bounds__(BLOCK) scale(const float* __restrict__ x, float* y, int n) ;" in host
    assert "y[i] = twice" not in host and "__forceinline__ float twice" not in host
    assert "int host_helper(int n)" in host and "ceil_div(int a" in host
    assert "amdkv_lean::launch(scale, host_helper(n), BLOCK,0,amdkv_hip_stream(0))(x.data_ptr<float>()" in host
    assert "amdkv_lean::launch(scale, (dim3(1)), (dim3(BLOCK)), (0), amdkv_hip_stream(0))( x.data_ptr<float>()" in host
    assert "// a comment" not in host                  # the kernel's body went, its comment with it


def test_template_kernels_are_instantiated_in_the_device_part() -> None:
    src = ("template <typename T, bool F>\n__global__ void k(T* y) { y[0] = F ? T(1) : T(0); }\n"
           "void g(float* y) { k<float, true><<<1, 1>>>(y); k<float, true><<<2, 1>>>(y);\n"
           "  hipLaunchKernelGGL(HIP_KERNEL_NAME(k<float, true>), dim3(3), dim3(1), 0, 0, y); }\n")
    device, host, names = lean_parts(src)
    # nvcc keeps an instantiation's host stub local to its unit: an exported getter hands it over
    getter = names[1]
    assert names == ("k", getter) and getter.startswith("amdkv_lean_kernel_")
    assert device.count('extern "C" void* amdkv_lean_kernel_') == 1          # one per distinct template-id
    assert f'extern "C" void* {getter}() {{ return (void*)&k<float, true>; }}' in device
    assert host.startswith(f'extern "C" void* {getter}();\n') and "__global__ void k(T* y) ;" in host
    assert (f"amdkv_lean::launch(reinterpret_cast<decltype(&k<float, true>)>({getter}()), 2, 1,0,"
            "amdkv_hip_stream(0))(y)") in host
    assert (f"amdkv_lean::launch(reinterpret_cast<decltype(&k<float, true>)>({getter}()), (dim3(3)), (dim3(1)), "
            "(0), amdkv_hip_stream(0))( y)") in host


def test_a_local_alias_in_a_template_argument_is_resolved_for_the_getter() -> None:
    src = ("template <typename T, bool F>\n__global__ void k(T* y) { y[0] = T(0); }\n"
           "typedef float f32;\n"
           "void g(void* y) {\n  typedef __half hf;\n  using also = hf;\n  k<also, true><<<1, 1>>>((also*)y);\n}\n"
           "void h(void* y) { typedef double clash; k<clash, false><<<1, 1>>>((clash*)y); }\n"
           "void i(void* y) { typedef float clash; k<f32, false><<<1, 1>>>((f32*)y); }\n")
    device, host, _ = lean_parts(src)
    assert "(void*)&k<__half, true>; }" in device          # local aliases (an alias of an alias) resolved
    assert "(void*)&k<clash, false>; }" in device          # two meanings: left alone (the build falls back)
    assert "(void*)&k<float, false>; }" in device          # a file-scope alias: resolved, same type
    assert "decltype(&k<also, true>)" in host               # the host unit keeps the candidate's spelling


@pytest.mark.parametrize("symbol, name, named", [
    ("f(at::Tensor)", "f", True), ("ns::f(int)", "f", True), ("void k<float, true>(float*)", "k", True),
    ("kk(float*)", "k", False), ("void k2<float>(float*)", "k", False), ("f", "f", True),
    ("at::relu(at::Tensor const&)", "relu", False), ("std::max(int, int)", "max", False),
    ("(anonymous namespace)::k(float*)", "k", True),
])
def test_symbol_names(symbol: str, name: str, named: bool) -> None:
    assert hip_build.names_function(symbol, name) is named


@pytest.mark.parametrize("src, why", [
    ("template <typename T> __global__ void k(T* y) { y[0] = T(0); }\n"
     "void g(float* y) { k<<<1, 1>>>(y); }\n", "without its template arguments"),
    ("__constant__ float c[4];\n__global__ void k(float* y) { y[0] = c[0]; }\n", "__constant__"),
    ("__device__ float g_sum;\n__global__ void k(float* y) { y[0] = g_sum; }\n", "__device__ variable"),
    ("__host__ __device__ float sq(float v) { return v * v; }\n__global__ void k(float* y) { y[0] = sq(y[0]); }\n",
     "non-inline __host__ __device__"),
    ("#include <cub/cub.cuh>\n__global__ void k(float* y) { y[0] = 0.f; }\n", "device-library header"),
    ("__global__ void k(float* y) { y[0] = 0.f; }\n#ifdef __CUDACC__\nint host_path = 1;\n#endif\n", "nvcc macro"),
    ("__device__ float sq(float v) { return v * v; }\n", "no __global__ kernel"),
    ("static __global__ void k(float* y) { y[0] = 0.f; }\n", "static kernel"),
    ("namespace {\n__global__ void k(float* y) { y[0] = 0.f; }\n}\n", "anonymous namespace"),
    ("__global__ void k(float* y) { y[0] = 0.f; }\nvoid g(float* y) { auto p = k; (p)<<<1, 1>>>(y); }\n",
     "kernel is an expression"),
])
def test_lean_refuses_what_it_cannot_split_soundly(src: str, why: str) -> None:
    with pytest.raises(SplitUnavailable, match=why):
        lean_parts(src)


def test_lean_units_kernelbench_cuda_sources_and_load() -> None:
    units = hip_units.extension_units(_kb_capture(KB), "cuda", "lean")
    assert [(u.name, u.kind) for u in units] == [("main_kernels.cu", "device"), ("main.cpp", "host")]
    dev, host = units
    assert dev.flags == ["-UAMDKV_HIP_TORCH_STREAM"] and host.binds == ("scale",)
    assert host.text.startswith(hip_units.HOST_PRELUDE) and "PYBIND11_MODULE" in host.text
    assert "amdkv_hip_stream" not in code_only(dev.text)   # launches live in the host unit only
    # cuda_sources style: declarations in cpp_sources stay a host unit with the binding
    cap = {"api": "load_inline", "name": "e", "cpp_sources": ["torch::Tensor f(torch::Tensor x);"],
           "cuda_sources": [KB], "functions": ["f"]}
    assert [u.name for u in hip_units.extension_units(cap, "cuda", "lean")] == ["cuda_kernels.cu", "main.cpp"]
    load = {"api": "load", "name": "e", "sources": [{"path": "k.cu", "text": KB}, {"path": "b.cpp", "text": "int x;"}]}
    assert [u.name for u in hip_units.extension_units(load, "cuda", "lean")] == ["src0_kernels.cu", "src0.cpp", "src1.cpp"]
    with pytest.raises(ValueError):
        hip_units.extension_units(_kb_capture(KB), "rocm", "lean")


@pytest.mark.parametrize("lean_fails", [False, True])
def test_build_order_lean_split_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lean_fails: bool) -> None:
    fake = _FakeBuild(host_fails=lean_fails)   # host units fail: lean and split both fail -> full
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    res = hip_build.build_capture(_kb_capture(KB), FAKE_CUDA, cache_dir=tmp_path, lean=True)
    assert res.ok
    if lean_fails:
        # lean first; once it failed, split and full at once (tests/test_hip_build_fail_fast.py), in either order
        assert res.scheme == "full" and fake.calls[0] == ["main_kernels.cu", "main.cpp"]
        assert sorted(fake.calls[1:]) == [["main.cu"], ["main.cu", "binding.cpp"]]
        assert res.fallback_reason.startswith("lean build failed") and "split build failed" in res.fallback_reason
    else:
        assert res.scheme == "lean" and res.fallback_reason is None and len(fake.calls) == 1
    # without the setting the lean scheme is never tried
    before = len(fake.calls)
    assert hip_build.build_capture(_kb_capture(KB), FAKE_CUDA, cache_dir=tmp_path / "b").scheme in ("split", "full")
    assert fake.calls[before:] and all(c[0] != "main_kernels.cu" for c in fake.calls[before:])


def test_lean_unavailable_goes_on_to_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBuild(host_fails=False)
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    src = "__constant__ float c[4];\n__global__ void k(float* y) { y[0] = c[0]; }\n" \
          "torch::Tensor f(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"
    res = hip_build.build_capture(_kb_capture(src), FAKE_CUDA, cache_dir=tmp_path, lean=True)
    assert res.ok and res.scheme == "split" and res.fallback_reason.startswith("lean: a __constant__")
    assert fake.calls == [["main.cu", "binding.cpp"]]


@pytest.mark.slow
def test_lean_units_compile_and_export_every_launched_kernel() -> None:
    """l1_relu's lean units and KB above for real: nvcc on the torch-free kernels, g++ with the
    precompiled torch header on launchers + binding, then the symbol check. A launch whose argument
    the kernel's parameter does not accept fails in the host unit, as the `<<<>>>` call fails in nvcc."""
    from amdkv.verify.backends.hip import capture_hip_sources

    need_nvcc_and_gxx()
    tc = hip_toolchain.nvcc_toolchain("sm_90")
    inc = (str(CI_INCLUDE),)
    cap = capture_hip_sources(RELU).report.captures[0]
    res = hip_build.compile_only(cap, tc, scheme="lean", extra_includes=inc)
    assert [u for u, _ in res] == ["main_kernels.cu", "main.cpp", "[bindings]"] and all(e is None for _, e in res), res
    res = hip_build.compile_only(_kb_capture(KB), tc, scheme="lean", extra_includes=inc)
    assert all(e is None for _, e in res), res
    # a template kernel launched as hipLaunchKernelGGL(HIP_KERNEL_NAME(matmul_tiled<__half, true>), ...)
    cap = capture_hip_sources(RELU.with_name("l1_matmul_tb.py")).report.captures[0]
    res = hip_build.compile_only(cap, tc, scheme="lean", extra_includes=inc)
    assert [u for u, _ in res][-1] == "[bindings]" and all(e is None for _, e in res), res
    bad = KB.replace("(x.data_ptr<float>(), y.data_ptr<float>(), n);", "(x.data_ptr<float>(), &n, n);")
    res = dict(hip_build.compile_only(_kb_capture(bad), tc, scheme="lean", extra_includes=inc))
    assert res["main_kernels.cu"] is None and "main.cpp" in res and res["main.cpp"]  # int* is no float*
