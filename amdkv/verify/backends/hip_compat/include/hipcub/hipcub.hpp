// amdkv HIP-on-CUDA compatibility layer: hipCUB mirrors CUB's API.
#pragma once
#include <hip/hip_runtime.h>
#include <cub/cub.cuh>
namespace hipcub = cub;
