// amdkv HIP-on-CUDA compatibility layer: HIP's cooperative groups follow CUDA's API and namespace.
// tiled_partition<64> (a whole CDNA wavefront) does not exist on NVIDIA (max 32): such code fails
// to compile here, which is the honest outcome.
#pragma once
#include "hip_runtime.h"
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
