__global__ void k(float* x){ int lane = threadIdx.x % 64; float v = __shfl_down(x[lane], 1); x[threadIdx.x] = v; }
