#include <hip/hip_fp8.h>
__global__ void q(const float* x, __hip_fp8_e4m3_fnuz* y){ y[threadIdx.x] = __hip_fp8_e4m3_fnuz(x[threadIdx.x]); }
