__global__ void k(float* x){ int lane = threadIdx.x & 63; x[threadIdx.x] = __shfl(x[threadIdx.x], lane ^ 1); }
