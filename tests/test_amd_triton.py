"""Triton -> AMD (gfx90a/gfx942/gfx950) static compile: capture, AOT compile, worker."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
import uuid

import pytest
import torch
import triton
import triton.language as tl

from amdkv.verify.amd.archs import ARCHS, lds_occupancy_cap
from amdkv.verify.amd.compile import compile_triton_for_amd
from amdkv.verify.amd.triton_aot import compile_capture_for_arch, exceeds_lds, parse_amdgcn
from amdkv.verify.amd.triton_capture import capture_launch


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def matmul_kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.)
        y = tl.load(b + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.)
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


def _add_capture(n=1000, block=256):
    x, y, o = torch.randn(n), torch.randn(n), torch.empty(n)
    return capture_launch(add_kernel, (x, y, o, n), {"BLOCK": block}, (triton.cdiv(n, block),))


def _matmul_capture(bm, bn, bk, warps, stages, dtype=torch.float16, m=256):
    a = torch.randn(m, m, dtype=dtype)
    b = torch.randn(m, m, dtype=dtype)
    c = torch.empty(m, m)
    return capture_launch(matmul_kernel, (a, b, c, m, m, m, m, 1, m, 1, m, 1),
                          {"BM": bm, "BN": bn, "BK": bk, "num_warps": warps, "num_stages": stages}, (2, 2))


def test_capture_signature_and_specialisation():
    cap = _add_capture(n=1000)
    json.dumps(cap)  # JSON-serialisable
    assert cap["kernel"] == "add_kernel" and cap["qualname"] == "add_kernel"
    assert cap["file"].endswith("test_amd_triton.py")
    assert cap["signature"] == {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32",
                                "BLOCK": "constexpr"}
    assert cap["constexprs"] == {"BLOCK": 256}
    assert "D" in cap["attrs"]["x_ptr"]          # fresh allocations are 16-byte aligned
    assert cap["attrs"]["n"] == ""               # 1000 % 16 != 0
    assert _add_capture(n=1024)["attrs"]["n"] == "D"
    # an int equal to 1 is specialised into a constexpr, as Triton's JIT does
    mm = _matmul_capture(64, 64, 32, 4, 2)
    assert mm["signature"]["sak"] == "constexpr" and mm["constexprs"]["sak"] == 1
    assert mm["num_warps"] == 4 and mm["num_stages"] == 2


def test_capture_offset_pointer_not_divisible():
    x = torch.randn(1001)
    cap = capture_launch(add_kernel, (x[1:], x[1:], x[1:], 1000), {"BLOCK": 128}, (8,))
    assert "D" not in cap["attrs"]["x_ptr"]


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942", "gfx950"])
def test_vector_add_compiles(arch):
    res = compile_capture_for_arch(add_kernel, _add_capture(), arch)
    assert res.compiled and res.error is None, res.error
    assert res.kernel == "add_kernel" and res.vgpr and res.sgpr and res.occupancy
    assert res.vgpr_spill == 0 and res.scratch_bytes == 0 and res.lds_bytes == 0
    assert res.lds_limit == ARCHS[arch].lds_bytes


def test_softmax_compiles_with_lds():
    x = torch.randn(37, 1001)
    out = torch.empty_like(x)
    cap = capture_launch(softmax_kernel, (out, x, x.stride(0), out.stride(0), 1001), {"BLOCK": 1024}, (37,))
    res = compile_capture_for_arch(softmax_kernel, cap, "gfx942")
    assert res.compiled and not exceeds_lds(res)
    assert res.lds_bytes is not None and res.lds_bytes > 0  # cross-warp reduction goes through LDS


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_matmul_uses_mfma(arch):
    res = compile_capture_for_arch(matmul_kernel, _matmul_capture(128, 128, 64, 8, 2), arch)
    assert res.compiled and res.error is None, res.error
    assert res.config["mfma_instructions"] > 0
    assert res.config["num_warps"] == 8 and res.config["constexprs"]["BM"] == 128


def test_huge_lds_is_flagged_not_failed():
    res = compile_capture_for_arch(matmul_kernel, _matmul_capture(256, 256, 128, 8, 4), "gfx942")
    assert res.compiled
    assert exceeds_lds(res)
    assert res.lds_bytes > 65536
    assert res.error == f"LDS {res.lds_bytes} B exceeds gfx942 limit 65536 B"
    assert res.occupancy == 0


def test_compile_error_is_reported():
    cap = _add_capture()
    cap["signature"]["BLOCK"] = "constexpr"
    cap["constexprs"]["BLOCK"] = 100  # tl.arange needs a power of two
    res = compile_capture_for_arch(add_kernel, cap, "gfx942")
    assert not res.compiled and res.error and "power of 2" in res.error.lower()


def test_unknown_arch():
    res = compile_capture_for_arch(add_kernel, _add_capture(), "gfx1100")
    assert not res.compiled and "unknown AMD arch" in res.error


def test_parse_amdgcn_and_lds_cap():
    asm = (".amdgpu_metadata\n---\namdhsa.kernels:\n  - .agpr_count: 4\n    .private_segment_fixed_size: 16\n"
           "    .sgpr_count: 30\n    .sgpr_spill_count: 0\n    .vgpr_count: 100\n    .vgpr_spill_count: 2\n"
           ".end_amdgpu_metadata\n; Occupancy: 5\n")
    f = parse_amdgcn(asm)
    assert f == {"vgpr": 100, "agpr": 4, "sgpr": 30, "vgpr_spill": 2, "sgpr_spill": 0, "scratch_bytes": 16,
                 "occupancy": 5}
    assert lds_occupancy_cap("gfx942", 32768, 8) == 4    # 2 groups x 8 waves / 4 SIMDs
    assert lds_occupancy_cap("gfx942", 65537, 4) == 0
    assert lds_occupancy_cap("gfx950", 65537, 4) == 2    # 160 KiB holds 2 groups


CANDIDATE = '''
import torch, triton, triton.language as tl
import torch.nn as nn

@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
'''


def _load(path):
    name = f"cand_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _interp_captures(path, monkeypatch):
    """Run the candidate under TRITON_INTERPRET=1 with a hook on InterpretedFunction.run."""
    from triton.runtime.interpreter import InterpretedFunction

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    mod = _load(path)
    assert type(mod.relu_kernel).__name__ == "InterpretedFunction"
    caps = []
    orig = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kw):
        caps.append(capture_launch(self, args, kw, grid))
        return orig(self, *args, grid=grid, warmup=warmup, **kw)

    monkeypatch.setattr(InterpretedFunction, "run", run)
    x = torch.randn(37, 1001)
    assert torch.equal(mod.ModelNew()(x), torch.relu(x))
    return mod, caps


def test_interpreter_capture_compiles_in_process(tmp_path, monkeypatch):
    path = tmp_path / "cand.py"
    path.write_text(CANDIDATE)
    mod, caps = _interp_captures(path, monkeypatch)
    assert len(caps) == 1 and caps[0]["interpreter"] is True
    res = compile_capture_for_arch(mod.relu_kernel, caps[0], "gfx942")
    assert res.compiled and res.kernel == "relu_kernel"


def test_worker_compiles_candidate(tmp_path, monkeypatch):
    path = tmp_path / "cand.py"
    path.write_text(CANDIDATE)
    _, caps = _interp_captures(path, monkeypatch)
    monkeypatch.delenv("TRITON_INTERPRET")
    res = compile_triton_for_amd(path, caps + caps, archs=("gfx942", "gfx950"))  # duplicates compile once
    assert [(r.arch, r.kernel, r.compiled) for r in res] == [("gfx942", "relu_kernel", True),
                                                             ("gfx950", "relu_kernel", True)]
    assert res[0].lds_limit == 65536 and res[1].lds_limit == 160 * 1024


def test_worker_reports_broken_candidate(tmp_path):
    path = tmp_path / "cand.py"
    path.write_text(CANDIDATE)
    caps = [capture_launch(_load(path).relu_kernel, (torch.randn(8), torch.empty(8), 8), {"BLOCK": 64}, (1,))]
    path.write_text(CANDIDATE + "\nraise RuntimeError('boom at import')\n")
    res = compile_triton_for_amd(path, caps, archs=("gfx942",))
    assert len(res) == 1 and not res[0].compiled and "boom at import" in res[0].error


def test_worker_nested_kernel(tmp_path):
    src = textwrap.dedent('''
        import torch, triton, triton.language as tl
        def make():
            @triton.jit
            def inner_kernel(x_ptr, n, BLOCK: tl.constexpr):
                offs = tl.arange(0, BLOCK)
                tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)
            return inner_kernel
    ''')
    path = tmp_path / "nested.py"
    path.write_text(src)
    k = _load(path).make()
    cap = capture_launch(k, (torch.randn(64), 64), {"BLOCK": 64}, (1,))
    assert "<locals>" in cap["qualname"]
    res = compile_triton_for_amd(path, [cap], archs=("gfx942",))
    assert res[0].compiled, res[0].error


def test_worker_timeout(tmp_path):
    path = tmp_path / "slow.py"
    path.write_text(CANDIDATE + "\nimport time\ntime.sleep(60)\n")
    cap = json.loads(json.dumps(_add_capture()))
    cap["qualname"] = cap["kernel"] = "relu_kernel"
    res = compile_triton_for_amd(path, [cap], archs=("gfx942",), timeout=3)
    assert not res[0].compiled and "timed out" in res[0].error
