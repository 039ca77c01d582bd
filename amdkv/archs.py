"""GPU target architectures: per-architecture facts of the AMD Instinct (CDNA) targets amdkv compiles
for, and `ArchResources`, what one compiled kernel uses on one target (part of every `Verdict`).

Standard library only, no amdkv import: the verifier (Triton AMD compiles, verdicts), the HIP toolchain
(hipcc's resource remarks) and the prompts all read it. It moved here from `amdkv.verify.amd.archs`
and `amdkv.verify.verdict` (both re-export it) so that the toolchain does not import the verifier
(issue 20: the verifier's HIP backend drives the toolchain; docs/import_graph.md).

Sources:
- [CDNA-HW] AMD ROCm docs, "GPU hardware specifications"
  (rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html): wavefront size 64, LDS per CU
  64 KiB for MI200 (gfx90a) and MI300 (gfx942), 160 KiB for MI350/MI355 (gfx950); 512 VGPRs
  (256 arch + 256 acc) per lane-slot ... expressed there as "VGPR file 512 KiB per CU".
- [LLVM-AMDGPU] LLVM AMDGPUUsage: on gfx90a/gfx942/gfx950 the unified register file gives a wave
  up to 512 registers (ArchVGPRs + AGPRs), allocated in granules of 8; up to 8 waves per SIMD
  (gfx90a/gfx942/gfx950 "max waves per EU" = 8); 4 SIMDs per CU; max workgroup size 1024;
  up to 102 SGPRs addressable per wave (106 with VCC/flat scratch, as clang counts them).
- [TOOLCHAINS.md] measured: Triton allocates LDS at launch, so the LDS limit must be checked by us.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class AmdArch:
    name: str
    products: str
    wave_size: int            # [CDNA-HW]
    lds_bytes: int            # max LDS per workgroup [CDNA-HW]
    vgprs_per_simd_lane: int  # unified VGPR+AGPR registers one wave can hold per lane [LLVM-AMDGPU]
    vgpr_granule: int         # allocation granularity of the unified file [LLVM-AMDGPU]
    max_waves_per_simd: int   # [LLVM-AMDGPU]
    simds_per_cu: int         # [CDNA-HW]
    max_workgroup_size: int   # [LLVM-AMDGPU]


ARCHS: dict[str, AmdArch] = {
    "gfx90a": AmdArch("gfx90a", "MI210/MI250/MI250X", 64, 64 * 1024, 512, 8, 8, 4, 1024),
    "gfx942": AmdArch("gfx942", "MI300A/MI300X/MI325X", 64, 64 * 1024, 512, 8, 8, 4, 1024),
    "gfx950": AmdArch("gfx950", "MI350X/MI355X", 64, 160 * 1024, 512, 8, 8, 4, 1024),
}
DEFAULT_ARCHS = ("gfx90a", "gfx942", "gfx950")


def get_arch(name: str) -> AmdArch | None:
    """Facts for `name` (accepts feature suffixes such as `gfx942:sramecc+:xnack-`)."""
    return ARCHS.get(name.split(":", 1)[0])


def lds_limit(name: str) -> int | None:
    a = get_arch(name)
    return a.lds_bytes if a else None


def lds_occupancy_cap(arch: str, lds_bytes: int, num_warps: int) -> int | None:
    """Waves per SIMD that LDS allows: workgroups per CU that fit in LDS x waves per workgroup / SIMDs.

    LDS is a per-CU pool (the per-workgroup maximum equals the CU's LDS on these parts [CDNA-HW]).
    Returns None when the arch is unknown; 0 when one workgroup does not fit.
    """
    a = get_arch(arch)
    if a is None:
        return None
    if lds_bytes <= 0:
        return a.max_waves_per_simd
    if lds_bytes > a.lds_bytes:
        return 0
    groups_per_cu = a.lds_bytes // lds_bytes
    waves = -(-(groups_per_cu * max(num_warps, 1)) // a.simds_per_cu)  # ceil: waves spread over SIMDs
    return max(0, min(a.max_waves_per_simd, waves))


@dataclasses.dataclass
class ArchResources:
    """Resources of one compiled kernel for one target architecture (AMD gfx* or NVIDIA sm_*)."""

    arch: str
    kernel: str
    compiled: bool
    vgpr: int | None = None
    agpr: int | None = None
    sgpr: int | None = None
    vgpr_spill: int | None = None
    sgpr_spill: int | None = None
    scratch_bytes: int | None = None
    lds_bytes: int | None = None
    lds_limit: int | None = None
    occupancy: int | None = None
    config: dict[str, Any] | None = None   # autotune config / constexprs the numbers describe
    error: str | None = None
