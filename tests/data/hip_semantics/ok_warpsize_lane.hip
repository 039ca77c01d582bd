__global__ void k(float* x){ int lane = threadIdx.x % warpSize, wid = threadIdx.x / warpSize; float v = __shfl_xor(x[threadIdx.x], 1); if (lane == 0) x[wid] = v; }
