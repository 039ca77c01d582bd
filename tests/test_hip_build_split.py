"""The split build scheme for HIP on NVIDIA (hip_units, hip_pch, hip_build): bound-function
declarations, which unit goes to which compiler, the precompiled header, the fallback to the full
scheme, and one real compile of the split units (nvcc + g++).

There is no GPU and no CUDA build of torch here: nothing is linked against libcudart/libtorch_cuda
or loaded; the full build + link + import runs only on the GPU machine (benchmarks/hip_gpu_check.py)."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from amdkv.verify.backends import hip_build, hip_pch, hip_toolchain, hip_units
from amdkv.verify.sandbox import ProcessResult

REPO = Path(__file__).resolve().parents[1]
RELU = REPO / "amdkv" / "tasks" / "builtin" / "solutions" / "hip" / "l1_relu.py"
CI_INCLUDE = REPO / "tests" / "data" / "hip_ci_include"
FAKE_CUDA = hip_toolchain.BuildToolchain("cuda", "/nonexistent/cuda/bin/nvcc", "release 13.0", "sm_90",
                                         "/nonexistent/cuda")

KERNEL = "__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n"


def _kb_capture(cpp: str, functions: object = ("f",), **kw: object) -> dict:
    return {"api": "load_inline", "name": "e", "cpp_sources": [cpp], "cuda_sources": [],
            "functions": list(functions) if isinstance(functions, tuple) else functions, **kw}


# ---------------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("src, expected", [
    ("torch::Tensor f(torch::Tensor x) {\n  return x;\n}", "torch::Tensor f(torch::Tensor x);"),
    ("std::vector<at::Tensor> f(const torch::Tensor& a, int64_t n, double eps = 1e-5) { return {a}; }",
     "std::vector<at::Tensor> f(const torch::Tensor& a, int64_t n, double eps = 1e-5);"),
    # multi-line parameters with comments, brace on its own line, after includes and a macro
    ("#include <hip/hip_runtime.h>\n#define CHECK(x) TORCH_CHECK(x.is_cuda(), #x)\n"
     "// the entry point\nat::Tensor\nf(\n    const at::Tensor& x,  // input\n    /* scale */ double s,\n"
     "    const std::string& mode = \"a;b\")\n{\n  return x;\n}",
     'at::Tensor f( const at::Tensor& x, double s, const std::string& mode = "a;b");'),
    # the definition after a declaration, a call in another function and a kernel
    ("torch::Tensor f(torch::Tensor x);\n" + KERNEL + "torch::Tensor g(torch::Tensor x) { return f(x); }\n"
     "__host__ torch::Tensor f(torch::Tensor x) noexcept { return x; }", "torch::Tensor f(torch::Tensor x) noexcept;"),
    ("std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor a,\n torch::Tensor b) { return {a, b}; }",
     "std::tuple<torch::Tensor, torch::Tensor> f(torch::Tensor a, torch::Tensor b);"),
    ("auto f(torch::Tensor x) -> torch::Tensor { return x; }", "auto f(torch::Tensor x) -> torch::Tensor;"),
])
def test_function_declaration_shapes(src: str, expected: str) -> None:
    assert hip_units.function_declaration("f", src) == expected


def test_function_declaration_ignores_members_calls_and_declarations() -> None:
    src = ("struct Op { torch::Tensor f(torch::Tensor x) { return x; } };\n"
           "torch::Tensor f(torch::Tensor x);\nvoid h() { Op o; o.f(x); }\n")
    with pytest.raises(hip_units.SplitUnavailable, match="namespace or class"):
        hip_units.function_declaration("f", src)  # only the method defines an `f`
    assert hip_units.function_declaration("f", src + "torch::Tensor f(torch::Tensor x) { return x; }") == \
        "torch::Tensor f(torch::Tensor x);"
    assert hip_units.function_declaration("f", "torch::Tensor f(torch::Tensor x);") is None


@pytest.mark.parametrize("src", [
    "static torch::Tensor f(torch::Tensor x) { return x; }",
    "inline torch::Tensor f(torch::Tensor x) { return x; }",
    "template <typename T> torch::Tensor f(T x) { return x; }",
    'extern "C" int f(int x) { return x; }',
    "namespace ns { torch::Tensor f(torch::Tensor x) { return x; } }",
    "__device__ float f(float x) { return x; }",
])
def test_undeclarable_definitions_signal_fallback(src: str) -> None:
    with pytest.raises(hip_units.SplitUnavailable):
        hip_units.function_declaration("f", src)


def test_missing_definition_signals_fallback() -> None:
    with pytest.raises(hip_units.SplitUnavailable, match="'missing'"):
        hip_units.bound_function_declarations(["f", "missing"], ["torch::Tensor f(torch::Tensor x) { return x; }"])
    with pytest.raises(hip_units.SplitUnavailable):
        hip_units.extension_units(_kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x);", ("f", "g")), "cuda",
                                  "split")


def test_declarations_from_dict_functions_and_cuda_sources() -> None:
    decls = hip_units.bound_function_declarations({"f": "doc", "g": "doc"},
                                                  ["int f(int a) { return a; }", "double g(double b) { return b; }"])
    assert decls == "int f(int a);\ndouble g(double b);\n"


def test_declarations_keep_using_of_torch_names() -> None:
    src = ("using namespace torch;\nusing at::Tensor;\nnamespace mine { int x; }\nusing namespace mine;\n"
           "void h() { using namespace std; }\nTensor f(Tensor x) { return x; }")
    assert hip_units.bound_function_declarations(["f"], [src]) == \
        "using namespace torch;\nusing at::Tensor;\nTensor f(Tensor x);\n"


# ---------------------------------------------------------------------------------- units
def test_split_kernelbench_style_binding_apart() -> None:
    cpp = ("#include <torch/extension.h>\n" + KERNEL +
           "torch::Tensor f(torch::Tensor x) {\n  k<<<1, 32>>>(nullptr);\n  return x;\n}")
    units = hip_units.extension_units(_kb_capture(cpp, extra_cflags=["-DX=1"]), "cuda", "split")
    main, binding = units
    assert (main.name, main.kind, binding.name, binding.kind) == ("main.cu", "device", "binding.cpp", "host")
    assert main.text.startswith("#include <torch/types.h>") and "torch/extension.h" not in main.text
    assert "PYBIND11_MODULE" not in main.text and "amdkv_hip_stream(0)" in main.text
    assert binding.text.startswith(hip_units.HOST_PRELUDE) and "torch::Tensor f(torch::Tensor x);" in binding.text
    assert "torch::wrap_pybind_function(f)" in binding.text and "__global__" not in binding.text
    assert binding.binds == ("f",) and binding.flags == main.flags == ["-DX=1"]


def test_split_cuda_sources_style_host_main() -> None:
    cap = {"api": "load_inline", "name": "e", "cpp_sources": ["torch::Tensor f(torch::Tensor x);"],
           "cuda_sources": ["#include <torch/extension.h>\n" + KERNEL +
                            "torch::Tensor f(torch::Tensor x) { return x; }"],
           "functions": ["f"], "extra_cuda_cflags": ["--use_fast_math"]}
    main, cuda = hip_units.extension_units(cap, "cuda", "split")
    assert (main.name, main.kind, cuda.name, cuda.kind) == ("main.cpp", "host", "cuda.cu", "device")
    assert "PYBIND11_MODULE" in main.text and main.binds == ()  # declared by the candidate, as with load_inline
    assert "torch/extension.h" not in cuda.text and cuda.flags == ["-ffast-math"]


def test_split_keeps_full_header_for_own_module() -> None:
    cpp = KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }\nPYBIND11_MODULE(my_ext, m) { m.def(\"f\", &f); }"
    units = hip_units.extension_units(_kb_capture(cpp, functions=None), "cuda", "split")
    assert [(u.name, u.kind) for u in units] == [("main.cu", "device")]
    assert units[0].text.startswith("#include <torch/extension.h>")
    assert hip_units.module_name_for(units, "ab" * 32) == "my_ext"


def test_split_load_api_and_rocm() -> None:
    cap = {"api": "load", "name": "e", "sources": [
        {"path": "b.cpp", "text": "#include <torch/extension.h>\nPYBIND11_MODULE(e, m) {}"},
        {"path": "k.cu", "text": "#include <torch/extension.h>\n" + KERNEL}]}
    host, dev = hip_units.extension_units(cap, "cuda", "split")
    assert (host.kind, dev.kind, host.name, dev.name) == ("host", "device", "src0.cpp", "src1.cu")
    assert "#include <torch/types.h>" in dev.text and "torch/extension.h" not in dev.text
    with pytest.raises(ValueError):
        hip_units.extension_units(cap, "rocm", "split")
    assert [u.kind for u in hip_units.extension_units(cap, "cuda")] == ["device", "device"]  # full scheme


def test_host_command_and_flags() -> None:
    cmd = FAKE_CUDA.host_compile_cmd("b.cpp", "b.o", "m", ["-DX"], Path("/c/pch/k/h.h"))
    assert cmd[0] == hip_toolchain.host_compiler()[0] and "-x" in cmd and "c++" in cmd
    assert ["-include", "/c/pch/k/h.h", "-Winvalid-pch"] == cmd[cmd.index("-include"):cmd.index("-include") + 3]
    assert f"-I{hip_toolchain.COMPAT_INCLUDE}" in cmd and "-DTORCH_EXTENSION_NAME=m" in cmd and "-O3" in cmd
    assert not any(c.startswith(("-gencode", "--expt")) for c in cmd)
    assert FAKE_CUDA.translate_flags(["-ffast-math", "-DA", "-std=c++17"], host=True) == ["-DA", "-std=c++17"]
    with pytest.raises(ValueError):
        hip_toolchain.BuildToolchain("rocm", "/opt/rocm/bin/hipcc", "6.4", "gfx942", "/opt/rocm").host_flags()


# ---------------------------------------------------------------------------------- precompiled header
def _fake_cxx(tmp_path: Path, rc: int) -> Path:
    """A 'compiler' that logs each call and writes its `-o` file ($5: `-x c++-header hdr -o out`)."""
    script = tmp_path / "fake-cxx"
    script.write_text(f"#!/bin/sh\necho call >> {tmp_path}/calls\nsleep 0.3\necho pch > \"$5\"\nexit {rc}\n")
    script.chmod(0o755)
    return script


def test_pch_built_once_under_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = str(_fake_cxx(tmp_path, 0))  # written once: rewriting it while a thread execs it is ETXTBSY
    monkeypatch.setattr(hip_pch, "host_compiler", lambda: (fake, "fake 1"))
    got: list[Path | None] = []
    threads = [threading.Thread(target=lambda: got.append(hip_pch.host_pch(FAKE_CUDA, cache_dir=tmp_path / "c")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (tmp_path / "calls").read_text().count("call") == 1
    assert len(set(got)) == 1 and got[0] is not None and got[0].name == hip_pch.PCH_HEADER
    assert got[0].read_text() == hip_units.HOST_PRELUDE and got[0].with_name(hip_pch.PCH_HEADER + ".gch").is_file()
    assert got[0].parent.parent == tmp_path / "c" / "pch"
    assert not [p for p in got[0].parent.parent.iterdir() if p.name.startswith(".")]  # no temp dir left


def test_pch_failure_remembered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = str(_fake_cxx(tmp_path, 1))
    monkeypatch.setattr(hip_pch, "host_compiler", lambda: (fake, "fake 1"))
    assert hip_pch.host_pch(FAKE_CUDA, cache_dir=tmp_path / "c") is None
    assert hip_pch.host_pch(FAKE_CUDA, cache_dir=tmp_path / "c") is None
    assert (tmp_path / "calls").read_text().count("call") == 1
    # other flags: another key, another attempt
    assert hip_pch.host_pch(FAKE_CUDA, ["-DY"], cache_dir=tmp_path / "c") is None
    assert (tmp_path / "calls").read_text().count("call") == 2


# ---------------------------------------------------------------------------------- symbol check
@pytest.mark.skipif(not (shutil.which("g++") and shutil.which("nm")), reason="needs g++ and nm (apt-get install g++ binutils; .ci/run installs them)")
@pytest.mark.parametrize("definition, missing", [
    ("int f(int x) { return x; }", []),
    ("static int f(int x) { return x; }", ["f(int)"]),
    ("int f(long x) { return (int)x; }", ["f(int)"]),
])
def test_unresolved_bindings(tmp_path: Path, definition: str, missing: list[str]) -> None:
    (tmp_path / "b.cpp").write_text("int f(int x);\nint (*keep)(int) = f;\n")
    (tmp_path / "d.cpp").write_text(definition + "\nint (*use)(long) = nullptr;\n")
    for n in ("b", "d"):
        subprocess.run(["g++", "-c", "-fPIC", str(tmp_path / f"{n}.cpp"), "-o", str(tmp_path / f"{n}.o")], check=True)
    assert hip_build.unresolved_bindings(tmp_path / "b.o", [tmp_path / "d.o"], ["f"]) == missing


# ---------------------------------------------------------------------------------- fallback
class _FakeBuild:
    """compile_units/run_process stand-ins: host units fail when `host_fails`; link writes the .so."""

    def __init__(self, host_fails: bool, timed_out: bool = False) -> None:
        self.host_fails, self.timed_out, self.calls = host_fails, timed_out, []

    def compile_units(self, units, tc, workdir, module, **kw):  # noqa: ANN001, ANN201
        self.calls.append([u.name for u in units])
        out = [(u.name, "g++: error: nope" if u.kind == "host" and self.host_fails else None) for u in units]
        return out, self.timed_out

    def run_process(self, argv, **kw):  # noqa: ANN001, ANN201
        Path(argv[argv.index("-o") + 1]).write_text("so")
        return ProcessResult(0, "", "", False, 0.0)


@pytest.mark.parametrize("host_fails", [False, True])
def test_build_capture_split_then_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_fails: bool) -> None:
    fake = _FakeBuild(host_fails)
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    cap = _kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }")
    res = hip_build.build_capture(cap, FAKE_CUDA, cache_dir=tmp_path)
    assert res.ok and Path(res.so_path).is_file() and not res.cached
    if host_fails:  # split failed -> full scheme's result, the reason kept
        assert res.scheme == "full" and "nope" in res.fallback_reason
        assert fake.calls == [["main.cu", "binding.cpp"], ["main.cu"]]
    else:
        assert res.scheme == "split" and res.fallback_reason is None and fake.calls == [["main.cu", "binding.cpp"]]
    again = hip_build.build_capture(cap, FAKE_CUDA, cache_dir=tmp_path)
    assert again.cached and again.scheme == res.scheme and again.so_path == res.so_path
    assert len(fake.calls) == (2 if host_fails else 1)  # a repeat compiles nothing


def test_build_capture_no_fallback_on_timeout_or_rocm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBuild(host_fails=True, timed_out=True)
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    cap = _kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }")
    res = hip_build.build_capture(cap, FAKE_CUDA, cache_dir=tmp_path)
    assert res.timed_out and res.scheme == "split" and len(fake.calls) == 1  # the machine's fault: no rebuild
    rocm = hip_toolchain.BuildToolchain("rocm", "/opt/rocm/bin/hipcc", "HIP version 6.4", "gfx942", "/opt/rocm")
    fake.timed_out = False
    res = hip_build.build_capture(cap, rocm, cache_dir=tmp_path)
    assert res.scheme == "full" and res.fallback_reason is None and fake.calls[-1] == ["main.hip"]


def test_build_capture_undeclarable_goes_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBuild(host_fails=False)
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    monkeypatch.setattr(hip_build, "run_process", fake.run_process)
    res = hip_build.build_capture(_kb_capture(KERNEL + "static torch::Tensor f(torch::Tensor x) { return x; }"),
                                  FAKE_CUDA, cache_dir=tmp_path)
    assert res.ok and res.scheme == "full" and "cannot be declared" in res.fallback_reason
    assert fake.calls == [["main.cu"]]


def test_compile_only_follows_build_order(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBuild(host_fails=True)
    monkeypatch.setattr(hip_build, "compile_units", fake.compile_units)
    cap = _kb_capture(KERNEL + "torch::Tensor f(torch::Tensor x) { return x; }")
    assert hip_build.compile_only(cap, FAKE_CUDA) == [("main.cu", None)]  # auto: split failed -> full
    assert fake.calls == [["main.cu", "binding.cpp"], ["main.cu"]]
    assert hip_build.compile_only(cap, FAKE_CUDA, scheme="split")[1] == ("binding.cpp", "g++: error: nope")
    assert hip_build.compile_only(_kb_capture(KERNEL), FAKE_CUDA, scheme="split")[0][0] == "[split]"  # f undefined


# ---------------------------------------------------------------------------------- real compile
def need_nvcc_and_gxx() -> None:
    """Skip (with the reason) where a real compile cannot run: these tests compile with nvcc and g++."""
    if not (shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists()) or not shutil.which("g++"):
        pytest.skip("nvcc and g++ needed to compile for real: install the CUDA toolkit (nvcc) and g++ "
                    "(apt-get install g++; .ci/run installs it)")


@pytest.mark.slow
def test_split_units_compile_with_nvcc_and_gxx() -> None:
    """l1_relu's split units for real: main.cu with nvcc (torch/types.h), binding.cpp with g++ and a
    precompiled torch/extension.h, then the symbol check; ~50 s with a cold PCH on 2 cores. Compile
    only: linking needs libcudart/libtorch_cuda, which this CPU-only machine lacks."""
    from amdkv.verify.backends.hip import capture_hip_sources

    need_nvcc_and_gxx()
    tc = hip_toolchain.nvcc_toolchain("sm_90")
    cap = capture_hip_sources(RELU).report.captures[0]
    res = hip_build.compile_only(cap, tc, scheme="split", extra_includes=(str(CI_INCLUDE),))
    assert [u for u, _ in res] == ["main.cu", "binding.cpp", "[bindings]"]
    assert all(e is None for _, e in res), res
