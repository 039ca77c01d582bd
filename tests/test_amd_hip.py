"""HIP candidates compiled for AMD targets with the real hipcc 7 (Debian sid chroot)."""

from __future__ import annotations

from pathlib import Path

import pytest
from toolchain_support import require_hipcc

from amdkv.toolchain.mirror import _from_deb822, _from_one_line
from amdkv.toolchain.remarks import parse_resource_remarks
from amdkv.verify.backends.hip_sources import device_only_source, global_kernel_names, safe_flags, translation_units

DATA = Path(__file__).parent / "data" / "hip_candidates"
TASK = Path(__file__).resolve().parents[1] / "amdkv" / "tasks" / "builtin" / "general" / "l1_relu.py"
OK = {"ok_relu_kb.py": {"relu_kernel"}, "ok_vector_add_cuda_sources.py": {"add_kernel"},
      "ok_row_softmax_kb.py": {"softmax_rows"}, "ok_matmul_lds_cuda_sources.py": {"matmul_tiled<16>"},
      "ok_layernorm_kb.py": {"layernorm_kernel"}}
ERR = {"err_syntax_kb.py": "expected ';'", "err_undeclared_kb.py": "undeclared identifier",
       "err_type_kb.py": "incompatible type", "err_bad_template_cuda_sources.py": "no matching function",
       "err_host_call_kb.py": "__host__ function"}


def _hipcc7():
    return require_hipcc("gfx942", "gfx950")


# ---- no compiler needed -----------------------------------------------------------------------
def test_mirror_parsing():
    deb822 = ("Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\n"
              "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\n")
    assert _from_deb822(deb822) == "http://mirror.example/debian"
    assert _from_one_line("deb [arch=amd64] http://m.example/debian/ bookworm main\n") == "http://m.example/debian"


def test_remark_parsing():
    err = "\n".join(f"a.hip:1:1: remark: {k} [-Rpass-analysis=kernel-resource-usage]" for k in [
        "Function Name: _Z1kPf", "    TotalSGPRs: 8", "    VGPRs: 2", "    AGPRs: 0", "    ScratchSize [bytes/lane]: 0",
        "    Occupancy [waves/SIMD]: 8", "    SGPRs Spill: 0", "    VGPRs Spill: 0", "    LDS Size [bytes/block]: 70000"])
    (r,) = parse_resource_remarks(err, "gfx942")
    assert (r.sgpr, r.vgpr, r.occupancy, r.lds_bytes, r.lds_limit) == (8, 2, 8, 70000, 65536)
    assert r.error == "LDS 70000 B exceeds gfx942 limit 65536 B"


def test_device_split_keeps_kernels_drops_torch():
    src = translation_units({"api": "load_inline", "name": "e",
                             "cpp_sources": [(DATA / "ok_relu_kb.py").read_text().split('r"""')[1].split('"""')[0]]})[0]
    split, removed = device_only_source(src.source)
    assert removed >= 1 and "__global__ void relu_kernel" in split and "torch::" not in split
    assert split.count("\n") == src.source.count("\n")  # line numbers preserved
    assert global_kernel_names(src.source) == {"relu_kernel"}


def test_safe_flags():
    assert safe_flags(["-O3", "--use_fast_math", "-DX=1", "-lfoo", "-I/x"]) == (["-ffast-math", "-DX=1"],
                                                                               ["-O3", "-lfoo", "-I/x"])


def test_capture_both_styles():
    from amdkv.verify.backends.hip import capture_hip_sources

    kb = capture_hip_sources(DATA / "ok_relu_kb.py", TASK)
    assert kb.worker_error is None and kb.report.import_error is None and kb.report.init_error is None
    (c,) = kb.report.captures
    assert c["name"] == "relu_ext" and c["cxx"] == "hipcc" and "__global__" in c["cpp_sources"][0]
    assert c["functions"] == ["relu_hip"]
    cs = capture_hip_sources(DATA / "ok_vector_add_cuda_sources.py")
    (c,) = cs.report.captures
    assert "__global__" in c["cuda_sources"][0] and c["extra_cuda_cflags"] == ["-O3", "--use_fast_math"]
    units = translation_units(c)
    assert [u.name for u in units] == ["vadd_ext/main.cpp", "vadd_ext/cuda.cu"]
    assert [u.has_device_code for u in units] == [False, True]


def test_stub_raises_compile_only(tmp_path):
    from amdkv.verify.backends.hip import capture_hip_sources

    cand = tmp_path / "c.py"
    cand.write_text((DATA / "ok_relu_kb.py").read_text() + "\nModelNew()(None)\n")
    cap = capture_hip_sources(cand).report
    assert len(cap.captures) == 1 and "compile-only" in cap.import_error


def test_no_sources_is_compile_error():
    from amdkv.verify.backends.hip import verify_hip_compile_only

    v = verify_hip_compile_only(None, DATA / "no_sources.py")
    assert (v["status"], v["reason"], v["compiled"]) == ("compile_error", "no_hip_sources", False)


# ---- real hipcc 7 ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OK))
def test_correct_candidates_compile_for_gfx942(name):
    _hipcc7()
    from amdkv.verify.backends.hip import verify_hip_compile_only

    v = verify_hip_compile_only(TASK if "relu" in name else None, DATA / name)
    assert (v["status"], v["reason"], v["compiled"], v["correct"]) == ("unverifiable", "no_hip_runtime", True, None), \
        v["diagnostics"]
    assert v["platform"] == "static:gfx942"
    kernels = {r["kernel"] for r in v["resources"]}
    assert kernels == OK[name]
    for r in v["resources"]:
        assert r["compiled"] and r["arch"] == "gfx942" and r["vgpr"] and r["sgpr"] and r["occupancy"]
        assert r["lds_limit"] == 65536 and r["scratch_bytes"] == 0
    if "softmax" in name or "matmul" in name or "layernorm" in name:
        assert all(r["lds_bytes"] > 0 for r in v["resources"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ERR))
def test_broken_candidates_are_compile_errors(name):
    _hipcc7()
    from amdkv.verify.backends.hip import verify_hip_compile_only

    v = verify_hip_compile_only(None, DATA / name)
    assert (v["status"], v["reason"], v["compiled"]) == ("compile_error", "hipcc_error", False)
    assert ERR[name] in v["diagnostics"], v["diagnostics"]
    assert all(not r["compiled"] for r in v["resources"])


@pytest.mark.slow
def test_gfx950_and_gfx90a():
    _hipcc7()
    from amdkv.verify.backends.hip import verify_hip_compile_only

    v = verify_hip_compile_only(None, DATA / "ok_row_softmax_kb.py", archs=("gfx950", "gfx90a"))
    assert v["status"] == "unverifiable" and v["compiled"] and v["platform"] == "static:gfx950,gfx90a"
    by_arch = {r["arch"]: r for r in v["resources"]}
    assert set(by_arch) == {"gfx950", "gfx90a"}
    assert by_arch["gfx950"]["lds_limit"] == 160 * 1024 and by_arch["gfx90a"]["lds_limit"] == 65536


@pytest.mark.slow
def test_compiler_cache_and_concurrency(tmp_path):
    tc = _hipcc7()
    from amdkv.toolchain.hipcc import HipCompiler

    comp = HipCompiler(tc, cache_dir=tmp_path)
    src = "#include <hip/hip_runtime.h>\n__global__ void k%d(float* x) { x[threadIdx.x] += %d; }\n"
    jobs = [(src % (i, i), a, []) for i in range(2) for a in ("gfx942", "gfx950")]
    res = comp.compile_many(jobs)
    assert all(r.ok and not r.cached for r in res)
    assert [r.resources[0].kernel for r in res] == ["k0", "k0", "k1", "k1"]
    again = comp.compile(*jobs[0])
    assert again.cached and again.ok
    assert not any(p.name.startswith("amdkv-") for p in (tc.root / "tmp").iterdir())  # work dirs removed
    mounts = Path("/proc/mounts").read_text()
    assert str(tc.root) not in mounts  # private mount namespaces: nothing left behind
