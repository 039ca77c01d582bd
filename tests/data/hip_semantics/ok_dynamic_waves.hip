__global__ void k(float* x){ extern __shared__ float s[]; int nw = (blockDim.x + warpSize - 1) / warpSize; float v = __shfl_down(x[threadIdx.x], 1); if (threadIdx.x < nw) s[threadIdx.x] = v; }
