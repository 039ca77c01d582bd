// amdkv HIP-on-CUDA compatibility layer: forwards to ATen/hip/HIPContext.h (CUDA build of torch).
#pragma once
#include <ATen/hip/HIPContext.h>
