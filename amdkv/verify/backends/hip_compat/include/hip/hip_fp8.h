// amdkv HIP-on-CUDA compatibility layer: fp8.
//
// CAUTION, FNUZ vs OCP: gfx942 (MI300) implements the "FNUZ" fp8 formats (e4m3fnuz: exponent bias
// 8, max 240, no negative zero, 0x80 = NaN; e5m2fnuz: bias 16), gfx950 and NVIDIA implement the
// OCP formats (e4m3fn: bias 7, max 448; e5m2: bias 15). The same bit pattern decodes to *half* the
// value in e4m3fnuz. This layer maps both HIP spellings to CUDA's OCP types, so kernels using the
// *_fnuz types compile but compute OCP arithmetic; the semantics guard marks such candidates
// `unverifiable` on NVIDIA (reason `fp8_fnuz`). OCP-typed kernels are faithful.
#pragma once
#ifndef AMDKV_HIP_COMPAT_FP8_H
#define AMDKV_HIP_COMPAT_FP8_H
#include <cuda_fp8.h>
typedef __nv_fp8_e4m3 __hip_fp8_e4m3;
typedef __nv_fp8_e5m2 __hip_fp8_e5m2;
typedef __nv_fp8x2_e4m3 __hip_fp8x2_e4m3;
typedef __nv_fp8x2_e5m2 __hip_fp8x2_e5m2;
typedef __nv_fp8_e4m3 __hip_fp8_e4m3_fnuz;   // NOT bit-compatible: see above
typedef __nv_fp8_e5m2 __hip_fp8_e5m2_fnuz;   // NOT bit-compatible: see above
typedef __nv_fp8x2_e4m3 __hip_fp8x2_e4m3_fnuz;
typedef __nv_fp8x2_e5m2 __hip_fp8x2_e5m2_fnuz;
typedef __nv_fp8_storage_t __hip_fp8_storage_t;
#endif
