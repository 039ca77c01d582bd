// amdkv HIP-on-CUDA compatibility layer: HIP bfloat16 types = CUDA's __nv_bfloat16 (same bits;
// the conversion intrinsics __float2bfloat16 / __bfloat162float share their names).
#pragma once
#ifndef AMDKV_HIP_COMPAT_BF16_H
#define AMDKV_HIP_COMPAT_BF16_H
#include <cuda_bf16.h>
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;
typedef __nv_bfloat16 hip_bfloat16;  // HIP's older struct type (hip/hip_bfloat16.h)
#endif
