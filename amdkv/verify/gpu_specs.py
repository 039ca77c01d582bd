"""Peak rates and last-level caches of the GPUs we report on (vendor datasheets, dense rates).

Used for the roofline floor (`sol` = floor / measured) and to size the cache flush before each
timed run (a buffer larger than the last-level cache: MI300X's 256 MB Infinity Cache included).
Numbers are datasheet leads, not measurements; the source is named per row.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    name: str
    vendor: str
    hbm_tb_s: float                 # peak memory bandwidth, TB/s
    llc_mb: float                   # last-level cache, MB
    tflops: dict[str, float]        # dense peak by dtype: matrix units where they exist
    source: str
    vector_tflops: dict[str, float] = dataclasses.field(default_factory=dict)  # non-matrix (SIMD/CUDA cores)


GPU_SPECS: dict[str, GpuSpec] = {
    "MI250X": GpuSpec("MI250X", "amd", 3.2768, 16.0,
                      {"fp64": 95.7, "fp32": 95.7, "fp16": 383.0, "bf16": 383.0, "int8": 383.0},
                      "AMD Instinct MI250X datasheet (OAM, both GCDs; 8 MB L2 per GCD)", {"fp64": 47.9, "fp32": 47.9}),
    "MI300X": GpuSpec("MI300X", "amd", 5.3, 256.0,
                      {"fp64": 163.4, "fp32": 163.4, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9,
                       "int8": 2614.9}, "AMD Instinct MI300X datasheet (256 MB Infinity Cache)", {"fp64": 81.7, "fp32": 163.4}),
    "MI325X": GpuSpec("MI325X", "amd", 6.0, 256.0,
                      {"fp64": 163.4, "fp32": 163.4, "fp16": 1307.4, "bf16": 1307.4, "fp8": 2614.9,
                       "int8": 2614.9}, "AMD Instinct MI325X datasheet", {"fp64": 81.7, "fp32": 163.4}),
    "MI355X": GpuSpec("MI355X", "amd", 8.0, 256.0,
                      {"fp64": 78.6, "fp32": 157.3, "fp16": 2516.6, "bf16": 2516.6, "fp8": 5033.2,
                       "int8": 5033.2}, "AMD Instinct MI355X datasheet", {"fp64": 78.6, "fp32": 157.3}),
    "H100": GpuSpec("H100", "nvidia", 3.35, 50.0,
                    {"fp64": 66.9, "fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
                     "fp8": 1978.9, "int8": 1978.9}, "NVIDIA H100 SXM datasheet (dense)", {"fp64": 33.5, "fp32": 66.9}),
    "H200": GpuSpec("H200", "nvidia", 4.8, 50.0,
                    {"fp64": 66.9, "fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
                     "fp8": 1978.9, "int8": 1978.9}, "NVIDIA H200 SXM datasheet (dense; H100 compute)", {"fp64": 33.5, "fp32": 66.9}),
}

# Used when the GPU is not in the table: flush generously, report no sol.
DEFAULT_FLUSH_MB = 512.0


def spec_for_device_name(name: str | None) -> GpuSpec | None:
    """Match a torch device name ('NVIDIA H200', 'AMD Instinct MI300X') to a table row."""
    if not name:
        return None
    upper = name.upper()
    for key in sorted(GPU_SPECS, key=len, reverse=True):
        if key in upper:
            return GPU_SPECS[key]
    return None


def flush_bytes(spec: GpuSpec | None) -> int:
    """Twice the last-level cache: enough to evict every line a previous run left behind."""
    mb = spec.llc_mb * 2 if spec else DEFAULT_FLUSH_MB
    return int(mb * 1024 * 1024)


def peak_tflops(spec: GpuSpec | None, dtype: str | None, *, matrix: bool = True) -> float | None:
    """Peak rate for `dtype`: matrix units by default, vector units with matrix=False (falls back to
    the matrix table when the vector rate is not listed)."""
    if spec is None or not dtype:
        return None
    if not matrix and dtype in spec.vector_tflops:
        return spec.vector_tflops[dtype]
    return spec.tflops.get(dtype)


def time_floor_ms(spec: GpuSpec | None, min_bytes: int | None, flops: float | None, dtype: str | None) -> float | None:
    """The roofline floor: max(bytes / bandwidth, flops / peak rate) in milliseconds."""
    if spec is None or not min_bytes:
        return None
    t_mem = min_bytes / (spec.hbm_tb_s * 1e12) * 1e3
    t_flop = 0.0
    if flops and dtype and dtype in spec.tflops:
        t_flop = flops / (spec.tflops[dtype] * 1e12) * 1e3
    return max(t_mem, t_flop)
