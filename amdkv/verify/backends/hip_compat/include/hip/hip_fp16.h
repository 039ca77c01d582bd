// amdkv HIP-on-CUDA compatibility layer: HIP half precision = CUDA's __half (same IEEE binary16).
#pragma once
#ifndef AMDKV_HIP_COMPAT_FP16_H
#define AMDKV_HIP_COMPAT_FP16_H
#include <cuda_fp16.h>

#endif
