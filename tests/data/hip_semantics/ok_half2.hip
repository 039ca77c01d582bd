#include <hip/hip_fp16.h>
__global__ void k(__half2* x){ x[threadIdx.x] = __hmul2(x[threadIdx.x], x[threadIdx.x]); }
