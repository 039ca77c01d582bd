// CI-only stand-in: CPU wheels of torch ship c10/cuda headers but not this generated one.
// Used only for nvcc compile-only tests on machines without a CUDA build of torch.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
