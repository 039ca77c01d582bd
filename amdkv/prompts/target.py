"""What the prompts tell a model about its AMD target: one table of facts per architecture.

Register file, LDS, wavefront and workgroup limits come from `amdkv.archs` (the same
numbers the verifier checks resources against); bandwidth and matrix peaks from
`amdkv.verify.gpu_specs` (the roofline table). What is added here is what a kernel author needs
and the verifier does not: the product and its compute-unit count, the matrix-core (MFMA) data
types and the fp8 flavour, with their Triton and PyTorch names.

Sources: AMD CDNA 2/3/4 instruction-set and whitepaper documents and the ROCm "GPU hardware
specifications" page (CU counts: MI250X 220 over two GCDs, i.e. 110 per device; MI300X/MI325X 304;
MI355X 256); fp8 support per arch from Triton's AMD backend (`HIPOptions.supported_fp8_dtypes`:
FNUZ fp8 natively on CDNA 3, OCP fp8 natively from CDNA 4, others emulated; `tl.dot` on AMD
computes fp32 inputs in IEEE fp32, never TF32).
"""

from __future__ import annotations

import dataclasses

from amdkv.errors import BadInputError
from amdkv.archs import ARCHS, AmdArch
from amdkv.verify.gpu_specs import GPU_SPECS, GpuSpec

DEFAULT_ARCH = "gfx942"


@dataclasses.dataclass(frozen=True)
class TargetFacts:
    """Everything the system prompt states about one AMD architecture."""

    arch: AmdArch
    generation: str              # CDNA 2 / 3 / 4
    device: str                  # the product one torch device is
    compute_units: int           # CUs of that device
    spec: GpuSpec                # peaks (roofline table)
    mfma_dtypes: tuple[str, ...]  # input types the matrix cores take
    fp8: str                     # which fp8 the hardware implements natively
    torch_fp8: tuple[str, ...]   # torch dtypes of that fp8
    triton_fp8: tuple[str, ...]  # Triton dtypes of that fp8

    @property
    def name(self) -> str:
        return self.arch.name

    @property
    def lds_kib(self) -> int:
        return self.arch.lds_bytes // 1024


_FACTS = {
    "gfx90a": dict(generation="CDNA 2", device="MI250X (one GCD; MI210 has 104 CUs)", compute_units=110,
                   spec="MI250X", mfma_dtypes=("fp64", "fp32", "fp16", "bf16", "int8"),
                   fp8="none (fp8 is emulated in software; avoid it)", torch_fp8=(), triton_fp8=()),
    "gfx942": dict(generation="CDNA 3", device="MI300X / MI325X", compute_units=304, spec="MI300X",
                   mfma_dtypes=("fp64", "fp32", "fp16", "bf16", "int8", "fp8 (FNUZ)"),
                   fp8="FNUZ: e4m3fnuz (max 240) and e5m2fnuz; no negative zero, no infinities, NaN is 0x80",
                   torch_fp8=("torch.float8_e4m3fnuz", "torch.float8_e5m2fnuz"),
                   triton_fp8=("tl.float8e4b8", "tl.float8e5b16")),
    "gfx950": dict(generation="CDNA 4", device="MI350X / MI355X", compute_units=256, spec="MI355X",
                   mfma_dtypes=("fp64", "fp32", "fp16", "bf16", "int8", "fp8 (OCP)", "fp6", "fp4"),
                   fp8="OCP: e4m3fn (max 448) and e5m2",
                   torch_fp8=("torch.float8_e4m3fn", "torch.float8_e5m2"),
                   triton_fp8=("tl.float8e4nv", "tl.float8e5")),
}
ARCH_NAMES = tuple(_FACTS)


def target_facts(arch: str = DEFAULT_ARCH) -> TargetFacts:
    """The facts for `arch` (gfx90a, gfx942 or gfx950); BadInputError for anything else."""
    key = arch.split(":", 1)[0]
    if key not in _FACTS or key not in ARCHS:
        raise BadInputError(f"no prompt facts for AMD architecture {arch!r}",
                            hint=f"use one of {', '.join(ARCH_NAMES)}")
    f = dict(_FACTS[key])
    return TargetFacts(arch=ARCHS[key], spec=GPU_SPECS[f.pop("spec")], **f)


def template_fields(facts: TargetFacts) -> dict[str, str]:
    """The `$placeholders` the templates use for the target (all strings)."""
    a, s = facts.arch, facts.spec
    dense = ", ".join(f"{k} {v:g}" for k, v in s.tflops.items() if k in ("fp32", "fp16", "bf16", "fp8", "int8"))
    return {
        "arch": a.name,
        "generation": facts.generation,
        "device": facts.device,
        "compute_units": str(facts.compute_units),
        "wave_size": str(a.wave_size),
        "lds_kib": str(facts.lds_kib),
        "max_workgroup": str(a.max_workgroup_size),
        "vgprs": str(a.vgprs_per_simd_lane),
        "max_waves_per_simd": str(a.max_waves_per_simd),
        "simds_per_cu": str(a.simds_per_cu),
        "hbm_tb_s": f"{s.hbm_tb_s:g}",
        "llc_mb": f"{s.llc_mb:g}",
        "peak_tflops": dense,
        "peak_source": s.source,
        "mfma_dtypes": ", ".join(facts.mfma_dtypes),
        "fp8": facts.fp8,
        "torch_fp8": ", ".join(facts.torch_fp8) or "none",
        "triton_fp8": ", ".join(facts.triton_fp8) or "none",
    }
