// amdkv HIP-on-CUDA compatibility layer: the runtime API lives in hip_runtime.h.
#pragma once
#include "hip_runtime.h"
