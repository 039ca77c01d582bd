// amdkv HIP-on-CUDA compatibility layer: the older hip_bfloat16 header.
#pragma once
#include "hip_bf16.h"
