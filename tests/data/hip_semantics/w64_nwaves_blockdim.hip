__global__ void k(float* x){ int nw = blockDim.x / 64; float v = __shfl_xor(x[0], 1); if (threadIdx.x < nw) x[threadIdx.x] = v; }
